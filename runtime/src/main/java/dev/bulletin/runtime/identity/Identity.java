package dev.bulletin.runtime.identity;

/** Who makes a call. {@code owner} is the user who started the cluster: only they may stop it. */
public record Identity(String user, String group, boolean owner) {}
