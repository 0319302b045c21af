package dev.bulletin.worker.node;

import dev.bulletin.protocol.BulletinVersion;
import dev.bulletin.worker.ResourceOptions;
import dev.bulletin.worker.HostName;
import dev.bulletin.bridge.ObjectStores;
import dev.bulletin.worker.WorkerOptions;
import dev.bulletin.worker.tls.TlsOptions;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/**
 * {@code bulletin worker}: a worker agent on this host that attaches to a runtime. The cluster's
 * worker token comes from BULLETIN_WORKER_TOKEN (never argv, where other users could read it).
 */
@Command(name = "bulletin worker", mixinStandardHelpOptions = true, versionProvider = VersionProvider.class,
    description = "Offer this host's GPUs and CPUs to a bulletin runtime. The worker runs until the"
        + " runtime goes away or it is stopped; the cluster's worker token comes from the"
        + " BULLETIN_WORKER_TOKEN variable.")
public final class WorkerMain implements Callable<Integer> {

  static final int EXIT_REFUSED = 3;
  /** A worker's default store is /dev/shm/bulletin-worker-ID-PID (see ObjectStores). */
  private static final String STORE_PREFIX = "worker-";

  @Option(names = "--head", required = true, description = "The runtime's address, HOST:PORT.")
  String head;

  @Option(names = "--pool", defaultValue = "", description = "The pool this worker belongs to (set by providers).")
  String pool;

  @Option(names = "--worker-id", description = "Name in status and logs (default: HOST-PID).")
  String workerId;

  @Mixin
  ResourceOptions resources = new ResourceOptions();

  @Option(names = "--expires-at", defaultValue = "0",
      description = "Epoch seconds when this worker's allocation ends; it takes no call it cannot finish by then.")
  double expiresAt;

  @Option(names = "--store-dir",
      description = "Object store folder (default: /dev/shm/bulletin-worker-<id>-<pid>).")
  Path storeDir;

  @Option(names = "--store-user-share", defaultValue = "${env:BULLETIN_STORE_USER_SHARE:-0}",
      description = "With users[].run_as (this worker as root): each user's share of this"
          + " worker's store in bytes, a memory file system per user that everything of theirs"
          + " counts against, however written (default: BULLETIN_STORE_USER_SHARE, else 0: none;"
          + " docs/security.md).")
  long storeUserShare;

  @Option(names = "--data-path", defaultValue = "${env:BULLETIN_DATA_PATH:-auto}",
      description = "How objects move to and from the runtime: auto (its bulk data port, or gRPC"
          + " chunks when it has none or it cannot be reached from here) or grpc (chunks only)."
          + " Default: BULLETIN_DATA_PATH, else auto.")
  String dataPath;

  @Option(names = "--reconnect-timeout",
      defaultValue = "${env:BULLETIN_RECONNECT_TIMEOUT:-120}",
      description = "Seconds the worker tries to reattach when its link to the runtime breaks;"
          + " its calls run on meanwhile (default: ${DEFAULT-VALUE}; env"
          + " BULLETIN_RECONNECT_TIMEOUT; 0: stop at once).")
  double reconnectTimeout;

  @Option(names = "--tls",
      description = "Dial the runtime over TLS (both its gRPC API and its data port), checking"
          + " its certificate against --tls-ca and the --head host name.")
  boolean tlsOn;

  @Option(names = "--tls-ca",
      description = "PEM CA that signed the runtime's certificate (the head's"
          + " $BULLETIN_HOME/ca.pem; default: the JDK's trusted CAs). Implies --tls.")
  Path tlsCa;

  @Option(names = "--join-token-file", defaultValue = "${env:BULLETIN_JOIN_TOKEN_FILE}",
      description = "A file holding a join token (else BULLETIN_JOIN_TOKEN): the worker makes a"
          + " key, exchanges the token once for a certificate of its own and attaches with it"
          + " (mutual TLS) instead of the worker token. Never give the token in argv.")
  Path joinTokenFile;

  @Option(names = "--identity-dir",
      description = "Where the worker keeps its key and certificate, owner-only (default:"
          + " $BULLETIN_HOME/workers/<id>, else ~/.bulletin/workers/<id>).")
  Path identityDir;

  /** The join token: from its file, else BULLETIN_JOIN_TOKEN; null when neither. */
  private String joinToken() throws java.io.IOException {
    if (joinTokenFile != null) {
      String token = java.nio.file.Files.readString(joinTokenFile).strip();
      if (token.isEmpty()) {
        throw new IllegalArgumentException("--join-token-file " + joinTokenFile + " is empty");
      }
      return token;
    }
    String token = System.getenv("BULLETIN_JOIN_TOKEN");
    return token == null || token.isBlank() ? null : token.strip();
  }

  private static Path home() {
    String home = System.getenv("BULLETIN_HOME");
    return home != null && !home.isBlank() ? Path.of(home)
        : Path.of(System.getProperty("user.home"), ".bulletin");
  }

  @Override
  public Integer call() throws Exception {
    int colon = head.lastIndexOf(':');
    if (colon <= 0) {
      throw new IllegalArgumentException("--head must be HOST:PORT, got " + head);
    }
    int port;
    try {
      port = Integer.parseInt(head.substring(colon + 1));
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException("--head must be HOST:PORT, got " + head);
    }
    String host = HostName.get();
    TlsOptions trust = tlsOn || tlsCa != null ? TlsOptions.client(tlsCa) : TlsOptions.plain();
    String token = joinToken();
    WorkerIdentity identity = null;
    if (token != null) {
      try {
        identity = WorkerIdentity.join(java.util.Objects.requireNonNull(
            io.vertx.core.net.SocketAddress.inetSocketAddress(port, head.substring(0, colon))),
            trust, token, workerId, identityDir, home());
      } catch (WorkerRefusedException e) {
        System.err.println("bulletin worker: " + e.getMessage());
        return EXIT_REFUSED;
      }
      System.out.println("bulletin worker " + identity.workerId() + " joined: its certificate"
          + " is in " + (identityDir != null ? identityDir
          : home().resolve("workers").resolve(identity.workerId())));
    }
    String id = identity != null ? identity.workerId()
        : workerId != null ? workerId : host + "-" + ProcessHandle.current().pid();
    if (!List.of("auto", "bulk", "grpc").contains(dataPath)) {
      throw new IllegalArgumentException("--data-path (or BULLETIN_DATA_PATH) must be auto or"
          + " grpc, got '" + dataPath + "'");
    }
    // Stores of workers on this host that were killed (SIGKILL skips their cleanup) go first:
    // each would keep its objects in shared memory until a reboot.
    for (Path abandoned : ObjectStores.removeAbandoned(ObjectStores.defaultBase(),
        "bulletin-" + STORE_PREFIX)) {
      System.out.println("bulletin worker: removed " + abandoned + ", the store of a worker that"
          + " is gone");
    }
    WorkerOptions worker = resources.worker(id);
    String slurmJob = System.getenv("SLURM_JOB_ID");
    String handle = System.getenv().getOrDefault("BULLETIN_PROVIDER_HANDLE",
        slurmJob != null ? "slurm:" + slurmJob : "");
    WorkerNodeOptions options = new WorkerNodeOptions(head.substring(0, colon), port,
        identity != null ? "" : System.getenv("BULLETIN_WORKER_TOKEN"), pool, worker, host, expiresAt, handle,
        // The pid keeps two workers of one id (a restart racing its predecessor's exit) apart.
        storeDir != null ? storeDir
            : ObjectStores.defaultFolder(STORE_PREFIX + id + "-" + ProcessHandle.current().pid()),
        BulletinVersion.get(), !dataPath.equals("grpc"), reconnectTimeout(), storeUserShare);
    WorkerNode node;
    try {
      node = WorkerNode.start(options, trust, identity);
    } catch (WorkerRefusedException e) {
      System.err.println("bulletin worker: " + e.getMessage());
      return EXIT_REFUSED;
    }
    Runtime.getRuntime().addShutdownHook(new Thread(node::close, "bulletin-worker-close"));
    System.out.println("bulletin worker " + id + " attached to " + head
        + (identity != null ? " over TLS, with its own certificate (mutual TLS)"
        : trust.enabled() ? " over TLS" : "") + " ("
        + ResourceOptions.describe(worker) + (pool.isEmpty() ? "" : ", pool " + pool) + ")");
    String why = node.ended().get();
    System.out.println("bulletin worker " + id + " stops: " + why);
    node.close();
    return 0;
  }


  private java.time.Duration reconnectTimeout() {
    if (!(reconnectTimeout >= 0) || Double.isInfinite(reconnectTimeout)) {
      throw new IllegalArgumentException("--reconnect-timeout (or BULLETIN_RECONNECT_TIMEOUT)"
          + " must be seconds >= 0, got " + reconnectTimeout);
    }
    return java.time.Duration.ofMillis(Math.round(reconnectTimeout * 1000));
  }

  public static int run(String[] args) {
    CommandLine commandLine = new CommandLine(new WorkerMain());
    commandLine.setExecutionExceptionHandler((error, cmd, parsed) -> {
      cmd.getErr().println("bulletin worker: " + error.getMessage());
      return 1;
    });
    return commandLine.execute(args);
  }
}
