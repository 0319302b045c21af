package dev.bulletin.runtime.impl;

import dev.bulletin.runtime.RuntimeOptions;
import dev.bulletin.runtime.identity.TokenRegistry;
import dev.bulletin.runtime.scheduler.FirstFitScheduler;
import dev.bulletin.runtime.scheduler.WorkerSlots;
import dev.bulletin.worker.WorkerAgent;
import dev.bulletin.worker.WorkerOptions;
import io.vertx.core.Future;
import io.vertx.core.VerticleBase;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.HttpServerOptions;
import io.vertx.grpc.server.GrpcServer;
import io.vertx.grpc.server.GrpcServerOptions;

/**
 * Owns the control plane's state on one event loop and serves the gRPC API. One instance per
 * runtime: the state is not shared between event loops.
 */
public final class RuntimeVerticle extends VerticleBase {
  private final RuntimeOptions options;
  private final WorkerAgent agent;
  private final String clusterId;
  private final String version;
  private final Runnable shutdown;
  private HttpServer server;

  public RuntimeVerticle(RuntimeOptions options, WorkerAgent agent, String clusterId,
      String version, Runnable shutdown) {
    this.options = options;
    this.agent = agent;
    this.clusterId = clusterId;
    this.version = version;
    this.shutdown = shutdown;
  }

  @Override
  public Future<?> start() {
    TokenRegistry tokens = TokenRegistry.of(options.ownerToken(), options.ownerUser(),
        options.workerToken(), options.config());
    ControlPlane plane = new ControlPlane(context, agent.store(), new FirstFitScheduler(),
        options.inlineLimitBytes(), options.drainMarginSeconds());
    WorkerOptions worker = options.worker();
    WorkerSlots slots = new WorkerSlots(worker.workerId(), worker.gpus().count(),
        worker.gpus().simulated(), worker.cpus(), worker.memoryBytes());
    plane.attach(new AttachedWorker(worker.workerId(), options.host(), "", worker.gpus().names(),
        false, 0, "", slots, WorkerLink.embedded(agent)));
    StatusReport status = new StatusReport(plane, clusterId);
    GrpcServer grpc = GrpcServer.server(vertx,
        new GrpcServerOptions().setMaxMessageSize(RuntimeOptions.MAX_MESSAGE_BYTES));
    Authenticator auth = new Authenticator(tokens);
    new GrpcApi(plane, status, clusterId, version, options.inlineLimitBytes(),
        RuntimeOptions.MAX_MESSAGE_BYTES, shutdown).mount(grpc, auth);
    new WorkerAttachApi(vertx, plane, clusterId, version, options.inlineLimitBytes(),
        RuntimeOptions.MAX_MESSAGE_BYTES).mount(grpc, auth);
    server = vertx.createHttpServer(new HttpServerOptions().setHost(options.host())
        .setPort(options.port()).setTcpNoDelay(true));
    return server.requestHandler(grpc).listen();
  }

  public int actualPort() {
    return server.actualPort();
  }
}
