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

  /** The user name of a worker known by its certificate: {@code worker:<id>}. */
  private static final String CERTIFIED = "worker:";

  /** A worker agent known by its own certificate (issue 28.2), not the shared token. */
  public static Identity certifiedWorker(String workerId) {
    return new Identity(CERTIFIED + workerId, "", false, true, false);
  }

  /** The worker id a certified worker's certificate names; empty for anyone else. */
  public java.util.Optional<String> certifiedWorkerId() {
    return worker && user.startsWith(CERTIFIED)
        ? java.util.Optional.of(user.substring(CERTIFIED.length())) : java.util.Optional.empty();
  }

  /** Whether this identity sees every user's calls (status, queue), not only its own. */
  public boolean seesAll() {
    return owner || admin;
  }
}
