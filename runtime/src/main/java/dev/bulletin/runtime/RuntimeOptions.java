package dev.bulletin.runtime;

import dev.bulletin.protocol.WireLimits;
import dev.bulletin.runtime.config.RuntimeConfig;
import dev.bulletin.worker.WorkerOptions;
import java.nio.file.Path;

/**
 * How the runtime runs: where it listens, its state folder, its identity settings and its
 * embedded worker. Immutable and validated on construction; errors name the field. Build one with
 * {@link #builder}: only the state folder and the embedded worker have no default.
 *
 * @param home state folder: runtime.json is written there once the runtime serves
 * @param host address to listen on (127.0.0.1 keeps the cluster on this machine)
 * @param port port to listen on; 0 picks a free one
 * @param ownerToken the token of the user who started the cluster
 * @param ownerUser that user's name
 * @param workerToken the cluster's worker token: remote workers attach with it (null: none can)
 * @param config users and (later) pools, QoS and quotas
 * @param worker the embedded worker agent
 * @param storeFolder the node-local object store (null: /dev/shm/bulletin-CLUSTER)
 * @param inlineLimitBytes objects up to this size travel inside control messages
 * @param drainMarginSeconds a worker whose allocation ends within this takes no call without a
 *     timeout
 * @param storeCapacityBytes the store's memory limit (0: half of its file system)
 * @param spillFolder where objects go under memory pressure (null: the temp dir)
 * @param dataPort the bulk data port for cross-host object bytes; 0 picks a free one
 * @param ticketSeconds how long a bulk transfer ticket stays valid
 * @param schedulerSeed the scheduler's randomness (how ties between equal workers break); logged
 *     at start, so a run can be replayed with the same seed
 * @param usageRetention usage ledger rows older than this are deleted; zero keeps them all
 * @param httpPort the HTTP port of /metrics and the dashboard, on the same address; 0 picks a
 *     free one, {@link #HTTP_OFF} serves none and keeps no metrics
 * @param metricsToken the token that may scrape /metrics from other hosts (null: only loopback,
 *     the owner and admins may)
 * @param reconnect how long sessions and workers whose link broke are waited for
 * @param stateFolder where the journal lives (null: {@code home}); see docs/durability.md
 * @param journal whether the control plane's state is journaled (false: a restart loses it)
 * @param storeArenaShare the share of the store's capacity kept pre-faulted, once for the host,
 *     for same-host writers' first large writes (0: none; see docs/data-plane.md)
 * @param storeUserShareBytes each user's share of the store where users run as accounts of
 *     their own (a file system per namespace; docs/security.md); 0: the store's capacity
 * @param workerIdentity worker certificates signed by the cluster CA, in place of the shared
 *     worker token (docs/security.md); null: workers attach with the worker token
 */
public record RuntimeOptions(
    Path home,
    String host,
    int port,
    String ownerToken,
    String ownerUser,
    String workerToken,
    RuntimeConfig config,
    WorkerOptions worker,
    Path storeFolder,
    long inlineLimitBytes,
    double drainMarginSeconds,
    long storeCapacityBytes,
    Path spillFolder,
    int dataPort,
    double ticketSeconds,
    long schedulerSeed,
    java.time.Duration usageRetention,
    int httpPort,
    String metricsToken,
    ReconnectOptions reconnect,
    Path stateFolder,
    boolean journal,
    double storeArenaShare,
    long storeUserShareBytes,
    dev.bulletin.runtime.identity.WorkerIdentityOptions workerIdentity) {

  /** {@link #httpPort} when the runtime serves no HTTP port and keeps no metrics. */
  public static final int HTTP_OFF = -1;


  public RuntimeOptions {
    required(home, "home");
    required(host, "host");
    required(config, "config");
    required(worker, "worker");
    required(usageRetention, "usageRetention");
    if (usageRetention.isNegative()) {
      throw new IllegalArgumentException("usageRetention must be >= 0 (0 keeps every row), got "
          + usageRetention);
    }
    required(reconnect, "reconnect");
    if (host.isBlank()) {
      throw new IllegalArgumentException("host must not be blank (127.0.0.1 keeps the cluster on"
          + " this machine, 0.0.0.0 listens everywhere)");
    }
    if (port < 0 || port > 65535) {
      throw new IllegalArgumentException("port must be 0..65535, got " + port);
    }
    if (dataPort < 0 || dataPort > 65535) {
      throw new IllegalArgumentException("dataPort must be 0..65535, got " + dataPort);
    }
    if (httpPort < HTTP_OFF || httpPort > 65535) {
      throw new IllegalArgumentException("httpPort must be 0..65535 or " + HTTP_OFF + " (off),"
          + " got " + httpPort);
    }
    if (!(ticketSeconds > 0)) {
      throw new IllegalArgumentException("ticketSeconds must be > 0, got " + ticketSeconds);
    }
    if (inlineLimitBytes < 0 || inlineLimitBytes > WireLimits.MAX_MESSAGE_BYTES / 2) {
      throw new IllegalArgumentException("inlineLimitBytes must be 0.." + WireLimits.MAX_MESSAGE_BYTES / 2
          + ", got " + inlineLimitBytes);
    }
    if (!(drainMarginSeconds >= 0)) {
      throw new IllegalArgumentException("drainMarginSeconds must be >= 0, got "
          + drainMarginSeconds);
    }
    if (!(storeArenaShare >= 0 && storeArenaShare <= 0.5)) {
      throw new IllegalArgumentException("storeArenaShare must be 0..0.5 (a share of the store's"
          + " capacity), got " + storeArenaShare);
    }
    if (storeCapacityBytes < 0) {
      throw new IllegalArgumentException("storeCapacityBytes must be >= 0 (0 = default), got "
          + storeCapacityBytes);
    }
    if (storeUserShareBytes < 0) {
      throw new IllegalArgumentException("storeUserShareBytes must be >= 0 (0 = the store's"
          + " capacity), got " + storeUserShareBytes);
    }
  }

  /** Where the runtime's state lives: {@code stateFolder}, else {@code home}. */
  public Path stateRoot() {
    return stateFolder != null ? stateFolder : home;
  }

  /** The journal's folder: {@code <state folder>/journal}. */
  public Path journalFolder() {
    return stateRoot().resolve("journal");
  }

  private static void required(Object value, String field) {
    if (value == null) {
      throw new IllegalArgumentException(field + " is required");
    }
  }

  /**
   * Options with the defaults of {@code bulletin-runtime} except the port, which is any free
   * one here (the command line asks for 8770).
   */
  public static Builder builder(Path home, WorkerOptions worker) {
    return new Builder(home, worker);
  }

  /** Collects the options; {@link #build} validates them once. */
  public static final class Builder {
    private final Path home;
    private final WorkerOptions worker;
    private String host = "127.0.0.1";
    private int port;
    private String ownerToken;
    private String ownerUser = System.getProperty("user.name");
    private String workerToken;
    private RuntimeConfig config = RuntimeConfig.empty();
    private Path storeFolder;
    private long inlineLimitBytes = 1 << 20;
    private double drainMarginSeconds = 60;
    private long storeCapacityBytes;
    private double storeArenaShare = 0;
    private long storeUserShareBytes;
    private dev.bulletin.runtime.identity.WorkerIdentityOptions workerIdentity;
    private Path spillFolder;
    private int dataPort;
    private double ticketSeconds = 60;
    private long schedulerSeed = java.util.concurrent.ThreadLocalRandom.current().nextLong();
    private java.time.Duration usageRetention = java.time.Duration.ZERO;
    private int httpPort;
    private String metricsToken;
    private ReconnectOptions reconnect = ReconnectOptions.defaults();
    private Path stateFolder;
    private boolean journal = true;

    private Builder(Path home, WorkerOptions worker) {
      this.home = home;
      this.worker = worker;
    }

    public Builder host(String host) {
      this.host = host;
      return this;
    }

    public Builder port(int port) {
      this.port = port;
      return this;
    }

    /** The owner's token and name: the user who started the cluster. */
    public Builder owner(String token, String user) {
      this.ownerToken = token;
      this.ownerUser = user;
      return this;
    }

    public Builder workerToken(String workerToken) {
      this.workerToken = workerToken;
      return this;
    }

    public Builder config(RuntimeConfig config) {
      this.config = config;
      return this;
    }

    public Builder storeFolder(Path storeFolder) {
      this.storeFolder = storeFolder;
      return this;
    }

    public Builder inlineLimitBytes(long inlineLimitBytes) {
      this.inlineLimitBytes = inlineLimitBytes;
      return this;
    }

    public Builder drainMarginSeconds(double drainMarginSeconds) {
      this.drainMarginSeconds = drainMarginSeconds;
      return this;
    }

    public Builder storeCapacityBytes(long storeCapacityBytes) {
      this.storeCapacityBytes = storeCapacityBytes;
      return this;
    }

    public Builder workerIdentity(
        dev.bulletin.runtime.identity.WorkerIdentityOptions workerIdentity) {
      this.workerIdentity = workerIdentity;
      return this;
    }

    public Builder storeUserShareBytes(long storeUserShareBytes) {
      this.storeUserShareBytes = storeUserShareBytes;
      return this;
    }

    public Builder storeArenaShare(double storeArenaShare) {
      this.storeArenaShare = storeArenaShare;
      return this;
    }

    public Builder spillFolder(Path spillFolder) {
      this.spillFolder = spillFolder;
      return this;
    }

    public Builder dataPort(int dataPort) {
      this.dataPort = dataPort;
      return this;
    }

    /** Seeds the scheduler's tie-breaks; the same seed replays its choices. Default: random. */
    public Builder schedulerSeed(long schedulerSeed) {
      this.schedulerSeed = schedulerSeed;
      return this;
    }

    public Builder usageRetention(java.time.Duration usageRetention) {
      this.usageRetention = usageRetention;
      return this;
    }

    /** The HTTP port of /metrics and the dashboard (default: any free; HTTP_OFF: none). */
    public Builder httpPort(int httpPort) {
      this.httpPort = httpPort;
      return this;
    }

    public Builder metricsToken(String metricsToken) {
      this.metricsToken = metricsToken;
      return this;
    }

    public Builder ticketSeconds(double ticketSeconds) {
      this.ticketSeconds = ticketSeconds;
      return this;
    }

    /** Where the journal lives (null: the home folder). */
    public Builder stateFolder(Path stateFolder) {
      this.stateFolder = stateFolder;
      return this;
    }

    /** Turns the journal off: faster submits, and a restart loses every call (--no-journal). */
    public Builder journal(boolean journal) {
      this.journal = journal;
      return this;
    }

    public Builder reconnect(ReconnectOptions reconnect) {
      this.reconnect = reconnect;
      return this;
    }

    /** @throws IllegalArgumentException naming the first field that is wrong */
    public RuntimeOptions build() {
      return new RuntimeOptions(home, host, port, ownerToken, ownerUser, workerToken, config,
          worker, storeFolder, inlineLimitBytes, drainMarginSeconds, storeCapacityBytes,
          spillFolder, dataPort, ticketSeconds, schedulerSeed, usageRetention, httpPort,
          metricsToken, reconnect, stateFolder, journal, storeArenaShare, storeUserShareBytes,
          workerIdentity);
    }
  }
}
