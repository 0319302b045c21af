package dev.bulletin.runtime.identity;

/**
 * Who makes a call. {@code owner} is the user who started the cluster: only they may stop it.
 * {@code admin} marks users the config trusts to see every user's calls ({@code admin: true}).
 * {@code worker} marks the cluster's worker agents: they attach and move objects, and submit
 * nothing.
 */
public record Identity(String user, String group, boolean owner, boolean worker, boolean admin) {

  public Identity(String user, String group, boolean owner) {
    this(user, group, owner, false, false);
  }

  /** The identity every worker agent of this cluster presents (with the worker token). */
  public static Identity workerAgent() {
    return new Identity("bulletin-worker", "", false, true, false);
  }

  /** Whether this identity sees every user's calls (status, queue), not only its own. */
  public boolean seesAll() {
    return owner || admin;
  }
}
