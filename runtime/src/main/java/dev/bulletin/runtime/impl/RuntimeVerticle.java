package dev.bulletin.runtime.impl;

import dev.bulletin.protocol.WireLimits;
import dev.bulletin.runtime.api.Authenticator;
import dev.bulletin.runtime.api.GrpcApi;
import dev.bulletin.runtime.api.SessionRegistry;
import dev.bulletin.runtime.api.StatusReport;
import dev.bulletin.runtime.control.ControlPlane;
import dev.bulletin.runtime.control.JournalRestore;
import dev.bulletin.runtime.control.Journaling;
import dev.bulletin.runtime.journal.Journals;
import dev.bulletin.runtime.control.PolicyPass;
import dev.bulletin.runtime.dataport.BulkServer;
import dev.bulletin.runtime.dataport.BulkTickets;
import dev.bulletin.runtime.objects.ObjectApi;
import dev.bulletin.runtime.workers.EmbeddedWorker;
import dev.bulletin.runtime.workers.PoolJournal;
import dev.bulletin.runtime.workers.PoolRunner;
import dev.bulletin.runtime.workers.WorkerAttachApi;
import dev.bulletin.runtime.workers.WorkerIdentityApi;
import dev.bulletin.runtime.identity.JoinTokens;
import dev.bulletin.runtime.identity.WorkerIdentities;
import dev.bulletin.runtime.identity.WorkerIdentityOptions;
import dev.bulletin.runtime.identity.WorkerRoster;
import dev.bulletin.runtime.pool.JoinTokenSource;
import dev.bulletin.worker.tls.WorkerCa;
import dev.bulletin.worker.HostName;
import dev.bulletin.runtime.PortInUseException;
import dev.bulletin.runtime.RuntimeOptions;
import dev.bulletin.runtime.identity.TokenRegistry;
import dev.bulletin.runtime.pool.Autoscaler;
import dev.bulletin.runtime.pool.PoolsConfig;
import dev.bulletin.runtime.pool.ProviderContext;
import dev.bulletin.runtime.pool.ScalingMetrics;
import dev.bulletin.runtime.pool.WorkerCommand;
import dev.bulletin.runtime.pool.WorkerProviders;
import dev.bulletin.runtime.usage.UsageApi;
import dev.bulletin.runtime.usage.UsageRecorder;
import dev.bulletin.runtime.usage.UsageStore;
import dev.bulletin.runtime.metrics.CallMeters;
import dev.bulletin.runtime.metrics.ClusterMeters;
import dev.bulletin.runtime.metrics.GpuHistory;
import dev.bulletin.runtime.web.WebAccess;
import dev.bulletin.runtime.web.WebPort;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.composite.CompositeMeterRegistry;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.time.Clock;
import java.util.concurrent.TimeUnit;
import java.util.logging.Logger;
import dev.bulletin.worker.WorkerAgent;
import dev.bulletin.worker.tls.TlsOptions;
import dev.bulletin.worker.tls.TlsSetup;
import io.vertx.core.Future;
import io.vertx.core.VerticleBase;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.Http2Settings;
import io.vertx.core.http.HttpServerOptions;
import io.vertx.grpc.server.GrpcServer;
import io.vertx.grpc.server.GrpcServerOptions;

/**
 * Owns the control plane's state on one event loop and serves the gRPC API. One instance per
 * runtime: the state is not shared between event loops.
 */
public final class RuntimeVerticle extends VerticleBase {
  private static final Logger LOG = Logger.getLogger(RuntimeVerticle.class.getName());
  /** Per-stream HTTP/2 flow-control window: eight 1 MiB object chunks in flight. */
  static final int OBJECT_WINDOW_BYTES = 8 << 20;
  private final RuntimeOptions options;
  /** TLS of both ports (the gRPC API and the data port), or plaintext. */
  private final TlsOptions tls;
  private final WorkerAgent agent;
  private final Journals.Opened journal;
  private ControlPlane plane;
  private final String clusterId;
  private final String version;
  private final Runnable shutdown;
  private HttpServer server;
  private BulkServer bulk;
  /**
   * Every meter of the runtime goes here (docs/observability.md): Prometheus's registry, which
   * /metrics scrapes, or with --http-port off one that keeps nothing.
   */
  private final MeterRegistry meterRegistry;
  /** /metrics and the dashboard; null with --http-port off. */
  private WebPort web;
  private String dashboardUrl = "";
  /** The dashboard's chart samples the GPU gauges this often. */
  private static final long HISTORY_MILLIS = 2_000;
  /** How often credits are earned and a pass runs even when nothing happens. */
  private static final long TICK_MILLIS = 5_000;
  private Autoscaler autoscaler;
  private UsageRecorder usage;
  /** Set when the owner stops the cluster: pool workers stop too (a crash leaves them). */
  private volatile boolean stopPoolWorkers;
  private SessionRegistry sessions;
  /** Worker certificates; null where workers attach with the shared worker token. */
  private WorkerIdentities identities;
  /** The issued and revoked workers, in the runtime's state folder. */
  static final String ROSTER_FILE = "worker-roster";
  /** Completes once the embedded worker's executors are warm and it takes calls. */
  private java.util.concurrent.CompletableFuture<Void> embeddedOpened;

  public RuntimeVerticle(RuntimeOptions options, TlsOptions tls, WorkerAgent agent,
      Journals.Opened journal, String clusterId, String version, Runnable shutdown) {
    this.journal = journal;
    this.options = options;
    this.tls = tls;
    this.agent = agent;
    this.clusterId = clusterId;
    this.version = version;
    this.shutdown = shutdown;
    this.meterRegistry = options.httpPort() == RuntimeOptions.HTTP_OFF
        ? new CompositeMeterRegistry() : new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
  }

  @Override
  public Future<?> start() {
    TokenRegistry tokens = TokenRegistry.of(options.ownerToken(), options.ownerUser(),
        options.workerToken(), options.config());
    // Logged so a run can be replayed: the seed decides how ties between equal workers break.
    LOG.info("scheduler seed " + options.schedulerSeed() + " (--scheduler-seed "
        + options.schedulerSeed() + " replays its choices)");
    plane = new ControlPlane(context, agent.store(),
        new PolicyPass(options.config().policy(), java.time.Clock.systemUTC(),
            java.time.Duration.ofMillis((long) (options.drainMarginSeconds() * 1000)),
            options.schedulerSeed()),
        options.inlineLimitBytes(), options.drainMarginSeconds(),
        options.config().runAsAccounts(), new Journaling(journal.journal()));
    // Serves before the embedded worker's executors are warm; it takes calls once they are.
    embeddedOpened = EmbeddedWorker.attach(plane, agent, context);
    usage = new UsageRecorder(plane, UsageStore.open(options.stateRoot(), options.usageRetention()),
        meterRegistry);
    vertx.setPeriodic(UsageRecorder.REFRESH_MILLIS, id -> usage.refresh());
    PoolsConfig pools = options.config().pools();
    PoolRunner poolRunner = pools.pools().isEmpty() ? null : new PoolRunner(plane, pools);
    StatusReport status = new StatusReport(plane, clusterId, poolRunner);
    vertx.setPeriodic(TICK_MILLIS, id -> plane.tick(java.time.Duration.ofMillis(TICK_MILLIS)));
    GrpcServer grpc = GrpcServer.server(vertx,
        new GrpcServerOptions().setMaxMessageSize(WireLimits.MAX_MESSAGE_BYTES));
    try {
      identities = workerIdentities();
    } catch (Exception e) {
      return Future.failedFuture(e);
    }
    Authenticator auth = new Authenticator(tokens, identities);
    Runnable stopCluster = () -> {
      stopPoolWorkers = true;
      shutdown.run();
    };
    BulkTickets tickets = new BulkTickets(java.time.Duration.ofMillis(
        (long) (options.ticketSeconds() * 1000)), System::nanoTime);
    ObjectApi objects = new ObjectApi(plane, tickets);
    plane.objects().direct().lifetime(tickets.ttl());
    plane.objects().direct().requireTls(tls.enabled());
    dev.bulletin.bridge.dataport.TlsEngines dataTls;
    try {
      dataTls = tls.enabled() ? TlsSetup.serverEngines(vertx, tls) : null;
    } catch (Exception e) {
      return Future.failedFuture(new IllegalArgumentException("cannot load the TLS certificate "
          + tls.certificate() + " and key " + tls.privateKey() + ": " + e.getMessage(), e));
    }
    try {
      // Same bind host as the gRPC API: a runtime on loopback keeps its data port there too.
      bulk = BulkServer.start(options.host(), options.dataPort(), dataTls, tickets,
          plane.store(), task -> context.runOnContext(ignored -> task.run()), objects);
    } catch (java.io.IOException e) {
      return Future.failedFuture(e);
    }
    objects.dataPort(bulk.port());
    sessions = new SessionRegistry(vertx, plane, options.reconnect().sessionWindow());
    long restoreMark = plane.journaling().mark();
    JournalRestore.restore(journal.restored(), plane, sessions,
        options.reconnect().workerGrace(), options.worker().workerId());
    // The restored sessions' new seq reservations are on disk before a client can resume.
    Future<Void> restoreKept = Future.fromCompletionStage(
        plane.journaling().durable(restoreMark), context);
    GrpcApi api = new GrpcApi(plane, sessions, objects, bulk.port(), status, clusterId, version,
        options.inlineLimitBytes(), WireLimits.MAX_MESSAGE_BYTES, stopCluster);
    api.mount(grpc, auth);
    new UsageApi(usage.store()).mount(grpc, auth);
    WorkerAttachApi attachApi = new WorkerAttachApi(vertx, plane, clusterId, version,
        options.inlineLimitBytes(), WireLimits.MAX_MESSAGE_BYTES,
        options.reconnect().linkLossGrace());
    attachApi.mount(grpc, auth);
    HttpServerOptions http = new HttpServerOptions()
        .setInitialSettings(new Http2Settings().setInitialWindowSize(OBJECT_WINDOW_BYTES))
        .setHttp2ConnectionWindowSize(4 * OBJECT_WINDOW_BYTES).setHost(options.host())
        .setPort(options.port()).setTcpNoDelay(true);
    if (identities != null) {
      new WorkerIdentityApi(vertx, identities, attachApi).mount(grpc, auth);
      // The gRPC port asks each peer for a certificate: workers have one, clients do not.
      server = vertx.createHttpServer(TlsSetup.serveAskingWorkers(http, tls));
    } else {
      server = vertx.createHttpServer(TlsSetup.serve(http, tls));
    }
    Future<?> webStarted;
    try {
      webStarted = startWeb(plane, status, poolRunner, tokens);
    } catch (IllegalArgumentException e) { // a bad metrics token
      bulk.close();
      return Future.failedFuture(e);
    }
    // The HTTP port listens first: Hello names the dashboard from the first call on.
    return webStarted.compose(started -> restoreKept).compose(started -> {
          api.dashboardUrl(dashboardUrl);
          return server.requestHandler(grpc).listen()
              .recover(error -> Future.failedFuture(PortInUseException.explain(error,
                  options.host(), options.port(), "--port")));
        })
        .recover(error -> {
          bulk.close(); // a failed start is not stopped: what it opened closes here
          if (web != null) {
            web.close();
          }
          return Future.failedFuture(error);
        })
        .compose(listening -> poolRunner == null
            ? Future.succeededFuture() : startPools(pools, poolRunner));
  }

  /**
   * Worker certificates where the runtime holds the cluster CA's key (--worker-ca-key): they
   * need TLS with that CA, since a worker proves itself in the TLS handshake.
   */
  private WorkerIdentities workerIdentities() throws Exception {
    WorkerIdentityOptions given = options.workerIdentity();
    if (given == null) {
      return null;
    }
    if (!tls.enabled() || tls.ca() == null) {
      throw new IllegalArgumentException("worker certificates (--worker-ca-key) need TLS with"
          + " the cluster CA (--tls-cert, --tls-key, --tls-ca)");
    }
    return WorkerIdentities.of(JoinTokens.inMemory(Clock.systemUTC()),
        WorkerCa.load(tls.ca(), given.caKey(), given.certificateLifetime()),
        WorkerRoster.open(options.stateRoot().resolve(ROSTER_FILE)), Clock.systemUTC());
  }

  private Future<Void> startPools(PoolsConfig pools, PoolRunner poolRunner) {
    if (options.workerToken() == null || options.workerToken().isBlank()) {
      return Future.failedFuture("the config has pools but the runtime has no worker token"
          + " (BULLETIN_WORKER_TOKEN; `bulletin up` sets it)");
    }
    ProviderContext providers = new ProviderContext(clusterId, headAddress(),
        options.workerToken(), options.worker().python().toString(),
        options.home().resolve("pools"), WorkerCommand.bulletin(), identities == null
            ? JoinTokenSource.none() : (workerId, ttl) -> {
              try {
                return java.util.Optional.of(identities.issueJoinToken(workerId, ttl));
              } catch (java.io.IOException e) {
                throw new java.io.UncheckedIOException(e);
              }
            });
    if (tls.enabled() && tls.ca() != null) {
      try {
        providers = providers.withCa(java.nio.file.Files.readString(tls.ca()));
      } catch (java.io.IOException e) {
        return Future.failedFuture("cannot read the cluster CA " + tls.ca() + " for the pools'"
            + " workers: " + e.getMessage());
      }
    }
    autoscaler = Autoscaler.create(pools, WorkerProviders.forPools(pools, providers),
        Clock.systemUTC(), new ScalingMetrics(meterRegistry),
        task -> context.runOnContext(ignored -> task.run()), poolRunner);
    poolRunner.start(autoscaler);
    vertx.setPeriodic(PoolRunner.TICK_MILLIS, id -> poolRunner.tick());
    // The workers an earlier runtime launched (journaled) are adopted or stopped.
    return Future.fromCompletionStage(autoscaler.start(
        PoolJournal.handles(journal.restored().poolWorkers()), options.reconnect().workerGrace()),
        context);
  }

  /**
   * Counts calls, workers' GPUs, the store, pools and scheduling passes in the registry, and
   * serves them with the dashboard on the HTTP port (docs/observability.md); nothing with
   * --http-port off.
   */
  private Future<?> startWeb(ControlPlane plane, StatusReport status, PoolRunner poolRunner,
      TokenRegistry tokens) {
    if (!(meterRegistry instanceof PrometheusMeterRegistry prometheus)) {
      return Future.succeededFuture();
    }
    WebAccess access = new WebAccess(tokens, options.metricsToken());
    plane.tasks().listen(new CallMeters(meterRegistry));
    ClusterMeters meters = new ClusterMeters(meterRegistry, plane, poolRunner);
    plane.observePasses(meters::passTook);
    GpuHistory history = new GpuHistory(meterRegistry, 1800); // an hour
    vertx.setPeriodic(1, HISTORY_MILLIS, id -> {
      meters.refreshGpus();
      history.sample(System.currentTimeMillis());
    });
    web = new WebPort(access, prometheus, meters, plane, status, history, HISTORY_MILLIS);
    return web.listen(vertx, options.host(), options.httpPort(), tls).onSuccess(listening ->
        dashboardUrl = (tls.enabled() ? "https://" : "http://") + urlHost() + ":"
            + web.actualPort() + "/");
  }

  /** The host a URL names: a name for a runtime listening everywhere, brackets for IPv6. */
  private String urlHost() {
    String host = options.host();
    if (host.equals("0.0.0.0") || host.equals("::")) {
      return HostName.get();
    }
    return host.contains(":") ? "[" + host + "]" : host;
  }

  /** The registry every meter of the runtime is registered in. */
  public MeterRegistry meterRegistry() {
    return meterRegistry;
  }

  /** The HTTP port of /metrics and the dashboard; 0 when there is none. */
  public int httpPort() {
    return web == null ? 0 : web.actualPort();
  }

  /** The dashboard's URL, empty when there is no HTTP port. */
  public String dashboardUrl() {
    return dashboardUrl;
  }

  /** The address pool workers dial: loopback for a runtime on loopback, else the host name. */
  private String headAddress() {
    String host = options.host();
    if (host.equals("0.0.0.0") || host.equals("::")) {
      host = HostName.get();
    }
    return host + ":" + server.actualPort();
  }


  @Override
  public Future<?> stop() {
    if (plane != null) {
      plane.journaling().stopped(); // a clean stop ends every session: nothing to resume
    }
    if (bulk != null) {
      bulk.close();
    }
    // The ledger writes what is queued and closes its file: off the event loop.
    Future<?> ledger = usage == null ? Future.succeededFuture()
        : vertx.executeBlocking(() -> {
          usage.store().close();
          return null;
        });
    if (autoscaler == null) {
      return ledger;
    }
    return ledger.compose(closed -> Future.fromCompletionStage(
        autoscaler.shutdown(stopPoolWorkers).orTimeout(60, TimeUnit.SECONDS)
            .exceptionally(error -> null)));
  }

  public int actualPort() {
    return server.actualPort();
  }

  /** Completes once the embedded worker's executors are warm and it takes calls. */
  public java.util.concurrent.CompletableFuture<Void> embeddedWorkerOpened() {
    return embeddedOpened;
  }

  /** The client sessions, attached and detached (the journal restores them here). */
  public SessionRegistry sessions() {
    return sessions;
  }

  public int dataPort() {
    return bulk.port();
  }
}
