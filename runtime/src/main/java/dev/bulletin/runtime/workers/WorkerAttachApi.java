package dev.bulletin.runtime.workers;

import dev.bulletin.runtime.api.Authenticator;
import dev.bulletin.runtime.control.ControlPlane;
import dev.bulletin.protocol.HeadMessage;
import dev.bulletin.protocol.RegisterWorker;
import dev.bulletin.protocol.WorkerAccepted;
import dev.bulletin.protocol.WorkerMessage;
import dev.bulletin.runtime.identity.Identity;
import dev.bulletin.runtime.scheduler.WorkerSlots;
import io.vertx.core.Vertx;
import io.vertx.grpc.common.GrpcStatus;
import io.vertx.grpc.common.ServiceName;
import io.vertx.grpc.server.GrpcServer;
import io.vertx.grpc.server.GrpcServerRequest;
import io.vertx.grpc.server.GrpcServerResponse;
import java.util.logging.Logger;

/**
 * The {@code bulletin.v1.Workers} service: remote worker agents attach here, register their
 * slots, and stay attached while their stream lives and their heartbeats keep coming.
 */
public final class WorkerAttachApi {

  private static final Logger LOG = Logger.getLogger(WorkerAttachApi.class.getName());
  private static final ServiceName SERVICE = ServiceName.create("bulletin.v1.Workers");
  static final long HEARTBEAT_MILLIS = 2_000;
  /** Silence after which a worker counts as gone, even if its connection still looks open. */
  static final long SILENCE_LIMIT_MILLIS = 5 * HEARTBEAT_MILLIS;

  private final Vertx vertx;
  private final ControlPlane plane;
  private final String clusterId;
  private final String version;
  private final long inlineLimit;
  private final long maxMessage;

  public WorkerAttachApi(Vertx vertx, ControlPlane plane, String clusterId, String version,
      long inlineLimit, long maxMessage) {
    this.vertx = vertx;
    this.plane = plane;
    this.clusterId = clusterId;
    this.version = version;
    this.inlineLimit = inlineLimit;
    this.maxMessage = maxMessage;
  }

  public void mount(GrpcServer server, Authenticator auth) {
    server.callHandler(Authenticator.method(SERVICE, "Attach", WorkerMessage.newBuilder()),
        auth.workers(this::attach));
  }

  /** One worker's stream, from registration until it goes away. */
  private final class Attachment {
    final GrpcServerResponse<WorkerMessage, HeadMessage> response;
    RemoteWorkerLink link;
    AttachedWorker worker;
    long lastHeard = System.nanoTime();
    long watchdog = -1;
    boolean ended;

    Attachment(GrpcServerResponse<WorkerMessage, HeadMessage> response) {
      this.response = response;
    }

    void onMessage(WorkerMessage message) {
      lastHeard = System.nanoTime();
      if (worker != null) {
        link.onMessage(message);
      } else if (!message.hasRegister()) {
        refuse(GrpcStatus.FAILED_PRECONDITION, "a worker must register before anything else");
      } else {
        register(message.getRegister());
      }
    }

    void register(RegisterWorker registration) {
      String problem = problemWith(registration);
      if (problem != null) {
        refuse(GrpcStatus.INVALID_ARGUMENT, problem);
        return;
      }
      if (plane.isAttached(registration.getWorkerId())) {
        refuse(GrpcStatus.ALREADY_EXISTS, "a worker named " + registration.getWorkerId()
            + " is already attached; give each worker its own --worker-id");
        return;
      }
      // A write that finds the stream broken detaches the worker on the next loop turn: never
      // in the middle of the scheduling pass that was placing a call on it.
      link = new RemoteWorkerLink(registration.getWorkerId(), response, plane.objects(),
          inlineLimit, cause -> vertx.runOnContext(ignored -> gone(cause)));
      WorkerSlots slots = new WorkerSlots(registration.getWorkerId(),
          registration.getGpuNamesCount(), registration.getSimulatedGpus(),
          registration.getCpus(), registration.getMemoryBytes());
      worker = new AttachedWorker(registration.getWorkerId(), registration.getHost(),
          registration.getPool(), registration.getGpuNamesList(), true,
          registration.getExpiresAt(), registration.getProviderHandle(), slots, link,
          registration.getGpuTopology());
      response.write(HeadMessage.newBuilder().setAccepted(WorkerAccepted.newBuilder()
          .setWorkerId(worker.id()).setClusterId(clusterId).setInlineLimitBytes(inlineLimit)
          .setMaxMessageBytes(maxMessage).setHeartbeatSeconds(HEARTBEAT_MILLIS / 1000.0))
          .build());
      plane.attach(worker);
      watchdog = vertx.setPeriodic(HEARTBEAT_MILLIS, id -> {
        if ((System.nanoTime() - lastHeard) / 1_000_000 > SILENCE_LIMIT_MILLIS) {
          gone("sent no heartbeat for " + SILENCE_LIMIT_MILLIS / 1000 + " s");
          end(GrpcStatus.UNAVAILABLE, "no heartbeat for " + SILENCE_LIMIT_MILLIS / 1000 + " s");
        }
      });
      LOG.info(() -> "worker " + worker.id() + " attached from " + registration.getHost() + ": "
          + slots.capacity() + (registration.getPool().isEmpty() ? ""
          : ", pool " + registration.getPool()));
    }

    void refuse(GrpcStatus status, String message) {
      end(status, message);
    }

    void end(GrpcStatus status, String message) {
      if (!ended) {
        ended = true;
        response.status(status).statusMessage(message).end();
      }
    }

    /** The worker is gone: its calls end as lost and it takes no more. Idempotent. */
    void gone(String cause) {
      if (watchdog >= 0) {
        vertx.cancelTimer(watchdog);
        watchdog = -1;
      }
      if (worker == null || link == null) {
        return;
      }
      AttachedWorker leaving = worker;
      worker = null;
      String why = "worker " + leaving.id() + " (" + leaving.host() + ") " + cause;
      link.close(why);
      plane.detach(leaving, cause);
      LOG.info(() -> "worker " + leaving.id() + " detached: " + cause);
    }
  }

  private String problemWith(RegisterWorker registration) {
    if (registration.getWorkerId().isBlank()) {
      return "a worker needs a worker_id";
    }
    if (!(registration.getCpus() >= 1)) {
      return "worker " + registration.getWorkerId() + " offers " + registration.getCpus()
          + " CPUs; a worker needs at least 1";
    }
    if (registration.getMemoryBytes() < 0) {
      return "worker " + registration.getWorkerId() + " offers negative memory";
    }
    if (!registration.getVersion().equals(version)) {
      return "worker " + registration.getWorkerId() + " runs bulletin "
          + registration.getVersion() + " but the runtime runs " + version
          + "; install the same version on both";
    }
    return null;
  }

  private void attach(Identity identity, GrpcServerRequest<WorkerMessage, HeadMessage> request) {
    Attachment attachment = new Attachment(request.response());
    // Headers go out with the acceptance: a refusal before it keeps its status message.
    request.handler(attachment::onMessage);
    request.endHandler(ignored -> {
      attachment.gone("ended its stream");
      attachment.end(GrpcStatus.OK, "");
    });
    request.exceptionHandler(error -> attachment.gone("lost its connection: " + error));
    request.response().exceptionHandler(error -> attachment.gone("lost its connection: " + error));
  }
}
