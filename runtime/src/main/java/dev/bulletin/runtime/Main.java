package dev.bulletin.runtime;

import dev.bulletin.worker.node.VersionProvider;
import dev.bulletin.protocol.BulletinVersion;
import dev.bulletin.worker.ResourceOptions;
import dev.bulletin.worker.node.WorkerMain;
import dev.bulletin.runtime.config.ClusterTokens;
import dev.bulletin.runtime.config.ConfigHost;
import dev.bulletin.runtime.config.RuntimeConfig;
import dev.bulletin.runtime.config.UnixAccounts;
import dev.bulletin.runtime.pool.WorkerProviders;
import dev.bulletin.worker.WorkerOptions;
import dev.bulletin.worker.tls.TlsOptions;
import java.io.IOException;
import java.net.BindException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/**
 * The runtime's process entry point. People start it with {@code bulletin up}, which passes the
 * owner's token in the environment (never on the command line, where other users can read it).
 */
@Command(name = "bulletin-runtime", mixinStandardHelpOptions = true, versionProvider = VersionProvider.class,
    description = "The bulletin control plane with an embedded worker agent. Usually started by"
        + " `bulletin up`; the owner's token comes from the BULLETIN_OWNER_TOKEN variable."
        + " `bulletin-runtime check-config FILE` checks a config file and prints every mistake.")
public final class Main implements Callable<Integer> {

  @picocli.CommandLine.Spec
  picocli.CommandLine.Model.CommandSpec spec;

  @Option(names = "--home", required = true, description = "State folder (runtime.json, token).")
  Path home;

  @Option(names = "--host", defaultValue = "127.0.0.1",
      description = "Address to listen on (default: ${DEFAULT-VALUE}, this machine only).")
  String host;

  @Option(names = "--port", defaultValue = "8770",
      description = "Port of the gRPC API (default: ${DEFAULT-VALUE}, or the next free one when"
          + " another process holds it; 0 = any free). A port given here that is taken is an"
          + " error.")
  int port;

  @Option(names = "--data-port", defaultValue = "0",
      description = "Raw TCP port for the bytes of cross-host object transfers, on the same"
          + " address as --host (default: ${DEFAULT-VALUE} = any free port; announced to clients).")
  int dataPort;

  @Option(names = "--http-port", defaultValue = "${env:BULLETIN_HTTP_PORT:-8780}",
      description = "HTTP port of /metrics and the web dashboard, on the same address as --host"
          + " (default: ${DEFAULT-VALUE}, or the next free one when another process holds it;"
          + " 0 = any free; off = none, and no metrics are kept; env"
          + " BULLETIN_HTTP_PORT). Scraping from other hosts takes BULLETIN_METRICS_TOKEN.")
  String httpPort;

  @Option(names = "--ticket-seconds",
      defaultValue = "${env:BULLETIN_TICKET_SECONDS:-60}",
      description = "How long a data-port transfer ticket stays valid; an unused upload ticket"
          + " frees its reserved room then (default: ${DEFAULT-VALUE}; env BULLETIN_TICKET_SECONDS).")
  double ticketSeconds;

  @Option(names = "--state-dir",
      description = "Folder of the runtime's journal (default: --home). On a shared filesystem,"
          + " a runtime started on another host with the same --state-dir takes over.")
  Path stateDir;

  @Option(names = "--no-journal", negatable = false,
      description = "Keep no journal: submits skip a disk write, and a restart (or crash) loses"
          + " every call, session and the usage ledger (docs/durability.md).")
  boolean noJournal;

  @Option(names = "--reconnect-window",
      defaultValue = "${env:BULLETIN_RECONNECT_WINDOW:-180}",
      description = "Seconds a client session whose stream broke is kept for its client to"
          + " resume it; its calls run on (default: ${DEFAULT-VALUE}; env"
          + " BULLETIN_RECONNECT_WINDOW; 0 ends it at once).")
  double reconnectWindow;

  @Option(names = "--worker-grace", defaultValue = "${env:BULLETIN_WORKER_GRACE:-60}",
      description = "After a restart, seconds the calls a remote worker ran wait for it to find"
          + " the new runtime and reattach before they are requeued (default: ${DEFAULT-VALUE};"
          + " env BULLETIN_WORKER_GRACE).")
  double workerGrace;

  @Option(names = "--link-loss-grace",
      defaultValue = "${env:BULLETIN_LINK_LOSS_GRACE:-5}",
      description = "While the runtime is up, seconds the calls of a remote worker whose link"
          + " closed (or went silent for 8 s) wait for it to reattach before they are requeued"
          + " (default: ${DEFAULT-VALUE}; env BULLETIN_LINK_LOSS_GRACE; 0 requeues at once).")
  double linkLossGrace;

  @Mixin
  ResourceOptions resources = new ResourceOptions();

  @Option(names = "--config",
      description = "YAML config file: users, pools, QoS classes and quotas (check one with"
          + " check-config).")
  Path config;

  @Option(names = "--store-dir", description = "Object store folder (default: /dev/shm/bulletin-<cluster>).")
  Path storeDir;

  @Option(names = "--store-capacity", defaultValue = "0",
      description = "Object store memory limit in bytes (default: half of the store's file system).")
  long storeCapacity;

  @Option(names = "--store-user-share", defaultValue = "0",
      description = "Where users run as accounts of their own (users[].run_as, runtime as"
          + " root): each user's share of the store in bytes, a memory file system per user that"
          + " everything of theirs counts against, however written (default: the store's"
          + " capacity; docs/security.md).")
  long storeUserShare;

  @Option(names = "--store-arena-share", defaultValue = "0.125",
      description = "Share of the store capacity kept pre-faulted for the host's first large"
          + " writes, filled in the background (memory taken from the machine while it waits,"
          + " given back under memory pressure; 0: none). Default: ${DEFAULT-VALUE}.")
  double storeArenaShare;

  @Option(names = "--spill-dir",
      description = "Local-disk folder for objects pushed out of memory (default: the temp dir).")
  Path spillDir;

  @Option(names = "--inline-limit", defaultValue = "1048576",
      description = "Objects up to this many bytes travel inside control messages (default: ${DEFAULT-VALUE}).")
  long inlineLimit;

  @Option(names = "--drain-margin", defaultValue = "60",
      description = "Seconds before a worker's allocation ends from which it takes no call without"
          + " a timeout (default: ${DEFAULT-VALUE}).")
  double drainMargin;

  @Option(names = "--usage-retention", defaultValue = "0s",
      description = "How long the usage ledger keeps a call's row, e.g. 400d (default 0s: for"
          + " ever).")
  String usageRetention;

  @Option(names = "--scheduler-seed", defaultValue = "${env:BULLETIN_SCHEDULER_SEED}",
      description = "The scheduler's seed: how ties between equal workers break (default: a"
          + " random one, logged at start; env BULLETIN_SCHEDULER_SEED). The same seed replays a"
          + " run's placements.")
  Long schedulerSeed;

  @Option(names = "--tls-cert",
      description = "PEM certificate (chain) both ports present; with --tls-key, the gRPC API and"
          + " the data port speak TLS only (`bulletin up` makes one when TLS is on).")
  Path tlsCert;

  @Option(names = "--tls-key", description = "The PEM private key of --tls-cert.")
  Path tlsKey;

  @Option(names = "--tls-ca",
      description = "PEM CA that signed --tls-cert, recorded in runtime.json for clients on this"
          + " host (default: none, clients use their system's trusted CAs).")
  Path tlsCa;

  @Option(names = "--worker-ca-key",
      description = "The PEM private key of --tls-ca: the runtime then signs each worker's own"
          + " certificate at join (bulletin worker join-token) and refuses the shared worker"
          + " token (`bulletin up --tls` passes its cluster CA's).")
  Path workerCaKey;

  @Option(names = "--worker-cert-lifetime",
      defaultValue = "${env:BULLETIN_WORKER_CERT_LIFETIME:-24h}",
      description = "How long a worker certificate is good; workers renew at two thirds of it"
          + " (default: ${DEFAULT-VALUE}).")
  String workerCertLifetime;

  private dev.bulletin.runtime.identity.WorkerIdentityOptions workerIdentity() {
    if (workerCaKey == null) {
      return null;
    }
    if (tlsCa == null) {
      throw new IllegalArgumentException("--worker-ca-key needs --tls-ca, the CA certificate"
          + " of that key");
    }
    try {
      return new dev.bulletin.runtime.identity.WorkerIdentityOptions(workerCaKey,
          dev.bulletin.protocol.Quantities.parseDuration(workerCertLifetime));
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("--worker-cert-lifetime: " + e.getMessage(), e);
    }
  }

  private java.time.Duration usageRetention() {
    try {
      return dev.bulletin.protocol.Quantities.parseDuration(usageRetention);
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("--usage-retention: " + e.getMessage(), e);
    }
  }

  @Override
  public Integer call() throws Exception {
    // A port another process holds is said first, alone: before the store, the event loop and
    // the embedded worker's executors start (and fill the log) only to be stopped again.
    // A default port another process holds moves to a free one, said here (and in the log);
    // one the user gave stays an error (docs/deployment.md, "Ports").
    java.util.function.Consumer<String> say = System.out::println;
    port = DefaultPorts.choose(host, port, given("--port"), "--port", say);
    checkPortFree(host, dataPort, "--data-port");
    int http = DefaultPorts.choose(host, httpPort(httpPort),
        given("--http-port") || System.getenv("BULLETIN_HTTP_PORT") != null, "--http-port", say);
    String ownerToken = System.getenv("BULLETIN_OWNER_TOKEN");
    String workerToken = System.getenv("BULLETIN_WORKER_TOKEN");
    String ownerUser = System.getenv().getOrDefault("BULLETIN_OWNER_USER",
        System.getProperty("user.name"));
    WorkerOptions worker = resources.worker("local");
    // The executors' interpreter is checked for each run_as account only where run_as is
    // honoured: a runtime running as root.
    ConfigHost thisMachine = ConfigHost.thisMachine()
        .withInterpreter(UnixAccounts.processIsRoot() ? worker.python() : null);
    RuntimeConfig runtimeConfig = config != null
        ? RuntimeConfig.load(config, new ClusterTokens(ownerToken, workerToken), thisMachine)
        : RuntimeConfig.empty();
    WorkerProviders.check(runtimeConfig.pools()); // a missing partition fails here, not later
    RuntimeOptions.Builder builder = RuntimeOptions.builder(home, worker).host(host).port(port)
        .owner(ownerToken, ownerUser).workerToken(workerToken).config(runtimeConfig)
        .storeFolder(storeDir).storeCapacityBytes(storeCapacity).spillFolder(spillDir)
        .storeArenaShare(storeArenaShare).storeUserShareBytes(storeUserShare)
        .inlineLimitBytes(inlineLimit).drainMarginSeconds(drainMargin).dataPort(dataPort)
        .ticketSeconds(ticketSeconds).httpPort(http)
        .metricsToken(System.getenv("BULLETIN_METRICS_TOKEN"))
        .usageRetention(usageRetention())
        .reconnect(ReconnectOptions.ofSeconds(reconnectWindow, workerGrace, linkLossGrace))
        .stateFolder(stateDir).journal(!noJournal).workerIdentity(workerIdentity());
    if (schedulerSeed != null) { // else the builder's random seed, logged at start
      builder.schedulerSeed(schedulerSeed);
    }
    RuntimeOptions options = builder.build();

    CountDownLatch stop = new CountDownLatch(1);
    TlsOptions tls = tlsCert == null && tlsKey == null && tlsCa == null ? TlsOptions.plain()
        : TlsOptions.server(tlsCert, tlsKey, tlsCa);
    BulletinRuntime runtime = BulletinRuntime.start(options, tls, stop::countDown);
    Runtime.getRuntime().addShutdownHook(new Thread(runtime::close, "bulletin-close"));
    System.out.println("bulletin runtime " + BulletinVersion.get() + " serving at "
        + runtime.address() + (tls.enabled() ? " (TLS)" : "") + ", data port " + runtime.dataPort() + " (cluster " + runtime.clusterId() + "; "
        + ResourceOptions.describe(worker) + "; store " + runtime.store().root() + ")");
    if (!runtime.dashboardUrl().isEmpty()) {
      System.out.println("dashboard " + runtime.dashboardUrl() + ", metrics "
          + runtime.dashboardUrl() + "metrics");
    }
    stop.await();
    runtime.close();
    return 0;
  }

  /** Whether the option was on the command line (else its default is in force). */
  private boolean given(String option) {
    return spec.commandLine().getParseResult().hasMatchedOption(option);
  }

  /**
   * Throws the {@link PortInUseException} the runtime's own listen would, when another process
   * listens on host:port (0 and off: nothing to check). Any other failure to bind (a host that
   * is not this machine's) is left to that listen to report.
   */
  static void checkPortFree(String host, int port, String option) throws PortInUseException {
    if (port <= 0) {
      return;
    }
    try (ServerSocket probe = new ServerSocket()) {
      probe.setReuseAddress(true); // as the runtime's servers bind: a port in TIME_WAIT is free
      probe.bind(new InetSocketAddress(host, port));
    } catch (BindException e) {
      if (String.valueOf(e.getMessage()).contains("Address already in use")
          && PortInUseException.explain(e, host, port, option) instanceof PortInUseException inUse) {
        throw inUse;
      }
    } catch (IOException | IllegalArgumentException | SecurityException e) {
      // Left to the runtime's listen, which says it in its own words.
    }
  }

  /** "off", or a port number 0..65535 (checked again by RuntimeOptions). */
  static int httpPort(String value) {
    if (value.strip().equalsIgnoreCase("off")) {
      return RuntimeOptions.HTTP_OFF;
    }
    try {
      return Integer.parseInt(value.strip());
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException("--http-port must be a port number (0 = any free) or"
          + " off, got '" + value + "'");
    }
  }

  public static void main(String[] args) {
    dev.bulletin.protocol.LogSetup.configure();
    // `java -jar bulletin-runtime.jar worker ...` runs a worker agent that attaches to a runtime.
    if (args.length > 0 && args[0].equals("worker")) {
      System.exit(WorkerMain.run(java.util.Arrays.copyOfRange(args, 1, args.length)));
    }
    // `... check-config FILE` reads a config as the runtime would, prints every mistake, exits.
    if (args.length > 0 && args[0].equals(CheckConfig.NAME)) {
      System.exit(new CommandLine(new CheckConfig())
          .execute(java.util.Arrays.copyOfRange(args, 1, args.length)));
    }
    CommandLine commandLine = new CommandLine(new Main());
    commandLine.setExecutionExceptionHandler((error, cmd, parsed) -> {
      cmd.getErr().println("bulletin-runtime: " + error.getMessage());
      return 1;
    });
    System.exit(commandLine.execute(args));
  }
}
