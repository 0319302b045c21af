package dev.bulletin.runtime.config;

/**
 * The cluster's own tokens, which no user of the config may share: the owner's (the user who ran
 * {@code bulletin up}; {@code BULLETIN_OWNER_TOKEN}) and the workers' ({@code
 * BULLETIN_WORKER_TOKEN}). Either may be null or blank: not known, nothing to compare.
 */
public record ClusterTokens(String owner, String worker) {
  public static final ClusterTokens NONE = new ClusterTokens(null, null);

  public ClusterTokens {
    owner = owner == null || owner.isBlank() ? null : owner;
    worker = worker == null || worker.isBlank() ? null : worker;
  }

  /** The variables the runtime reads them from, as {@code bulletin up} sets them. */
  public static ClusterTokens fromEnvironment() {
    return new ClusterTokens(System.getenv("BULLETIN_OWNER_TOKEN"),
        System.getenv("BULLETIN_WORKER_TOKEN"));
  }
}
