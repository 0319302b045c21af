package dev.bulletin.runtime.scheduler.plan;

/** A call that can never run under this cluster and policy; {@code reason} says what to change. */
public record Rejection(String callId, String reason) {}
