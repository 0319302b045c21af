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
import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.protocol.HeldObject;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.logging.Logger;

/**
 * The {@code bulletin.v1.Workers} service: remote worker agents attach here, register their
 * slots, and stay attached while their stream lives and their heartbeats keep coming.
 */
public final class WorkerAttachApi {

  private static final Logger LOG = Logger.getLogger(WorkerAttachApi.class.getName());
  private static final ServiceName SERVICE = ServiceName.create("bulletin.v1.Workers");
  static final long HEARTBEAT_MILLIS = 2_000;
  /**
   * Silence after which a worker's link counts as broken, even if its connection still looks
   * open (a host that froze or fell off the network sends no FIN): four missed heartbeats, so
   * one slow turn (a GC pause) is no death. Checked every second, the link is declared broken
   * within 9 s and, with the link-loss grace (5 s), its calls requeued within 14 s.
   */
  static final long SILENCE_LIMIT_MILLIS = 4 * HEARTBEAT_MILLIS;
  private static final long WATCHDOG_MILLIS = 1_000;
  /** A heartbeat's acknowledgement waits this long: a call's end reaches the journal later. */
  private static final long ACK_BATCH_MILLIS = 50;

  private final Vertx vertx;
  private final ControlPlane plane;
  private final String clusterId;
  private final String version;
  private final long inlineLimit;
  private final long maxMessage;
  /**
   * How long a worker whose link broke keeps its calls, waiting for it to reattach (the
   * link-loss grace, --link-loss-grace; not the restart's --worker-grace: this runtime is up,
   * so a live worker redials within a second or two, and a closed link is most often a death).
   */
  private final java.time.Duration grace;
  /** Workers whose link broke, by id, within their grace period. */
  private final Map<String, Attachment> parked = new HashMap<>();
  /** Workers attached now, by id: a revocation ends theirs. */
  private final Map<String, Attachment> live = new HashMap<>();
  /**
   * The newest certificate's end of each certified worker (renewals move it): a link whose
   * worker holds no valid certificate any more is ended.
   */
  private final Map<String, java.time.Instant> certifiedUntil = new HashMap<>();

  public WorkerAttachApi(Vertx vertx, ControlPlane plane, String clusterId, String version,
      long inlineLimit, long maxMessage, java.time.Duration linkLossGrace) {
    this.grace = linkLossGrace;
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

  /** Whether a worker of this id is attached now (or waits to reattach). */
  boolean isAttached(String workerId) {
    return live.containsKey(workerId) || parked.containsKey(workerId);
  }

  /** A certified worker got a new certificate (join or renewal), good until {@code end}. */
  void renewed(String workerId, java.time.Instant end) {
    certifiedUntil.merge(workerId, end, (a, b) -> a.isAfter(b) ? a : b);
  }

  /** The worker was revoked: its link ends now, its calls lost. Whether it was attached. */
  boolean revoked(String workerId) {
    certifiedUntil.remove(workerId);
    Attachment attachment = live.containsKey(workerId) ? live.get(workerId)
        : parked.get(workerId);
    if (attachment == null) {
      return false;
    }
    attachment.gone("was revoked (bulletin worker revoke)");
    attachment.end(GrpcStatus.PERMISSION_DENIED, "worker " + workerId + " is revoked");
    return true;
  }

  /** One worker's stream, from registration until it goes away. */
  private final class Attachment {
    final GrpcServerResponse<WorkerMessage, HeadMessage> response;
    /** The id its certificate names; null for a worker of the shared token. */
    final String certifiedId;
    RemoteWorkerLink link;
    AttachedWorker worker;
    long lastHeard = System.nanoTime();
    long watchdog = -1;
    long graceTimer = -1;
    /** Why the worker took no new calls before its link broke (its pool's drain), or null. */
    String drainedBefore;
    boolean ended;

    Attachment(GrpcServerResponse<WorkerMessage, HeadMessage> response, String certifiedId) {
      this.response = response;
      this.certifiedId = certifiedId;
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
      if (certifiedId != null && !certifiedId.equals(registration.getWorkerId())) {
        refuse(GrpcStatus.PERMISSION_DENIED, "the certificate is worker " + certifiedId
            + "'s, not " + registration.getWorkerId() + "'s: a worker attaches under its own"
            + " id only");
        return;
      }
      Attachment before = parked.remove(registration.getWorkerId());
      if (before != null) {
        vertx.cancelTimer(before.graceTimer);
        if (registration.getReattach()) {
          takeOver(before, registration);
          return;
        }
        before.gone("registered anew (it restarted): the calls it ran are lost");
      }
      if (plane.isAttached(registration.getWorkerId())) {
        refuse(GrpcStatus.ALREADY_EXISTS, "a worker named " + registration.getWorkerId()
            + " is already attached; give each worker its own --worker-id");
        return;
      }
      // A write that finds the stream broken parks or detaches the worker on the next loop
      // turn: never in the middle of the scheduling pass that was placing a call on it.
      link = new RemoteWorkerLink(registration.getWorkerId(), response, plane.objects(),
          inlineLimit, cause -> vertx.runOnContext(ignored -> lost(cause)),
          task -> vertx.runOnContext(ignored -> task.run()));
      link.acknowledgeWhen(WorkerAttachApi.this::whenJournaled);
      WorkerSlots slots = new WorkerSlots(registration.getWorkerId(),
          registration.getGpuNamesCount(), registration.getSimulatedGpus(),
          registration.getCpus(), registration.getMemoryBytes());
      worker = new AttachedWorker(registration.getWorkerId(), registration.getHost(),
          registration.getPool(), registration.getGpuNamesList(), true,
          registration.getExpiresAt(), registration.getProviderHandle(), slots, link,
          registration.getGpuTopology());
      // A worker that reattaches to a restarted runtime runs on the calls the journal had on
      // it: they are adopted. Any other it runs (after its grace, this runtime gave them up)
      // it stops. What its store holds is still worth knowing. A new link has received
      // nothing: the worker sends again every report not acknowledged.
      List<String> stop = plane.restoredRemoteWork().registered(worker,
          registration.getReattach(), reportedGpus(registration),
          new java.util.LinkedHashSet<>(registration.getRunningTaskIdsList()),
          heldKeys(registration));
      GivenUpCalls givenUp = GivenUpCalls.watch(worker, stop, plane::workerOpened);
      link.givenUp(givenUp);
      // An old run's end that never comes (a worker that lost it) must not drain it for good.
      vertx.setTimer(GivenUpCalls.WAIT_MILLIS, id -> givenUp.stopWaiting());
      accept(registration, stop, 0);
      reregisterHeld(registration);
      plane.attach(worker);
      live.put(worker.id(), this);
      LOG.info(() -> "worker " + worker.id() + " attached from " + registration.getHost() + ": "
          + slots.capacity() + (registration.getPool().isEmpty() ? ""
          : ", pool " + registration.getPool()));
    }

    /** The worker came back within its grace: this stream takes over its link and calls. */
    void takeOver(Attachment before, RegisterWorker registration) {
      worker = before.worker;
      link = before.link;
      before.worker = null; // the old stream's late handlers find nothing to detach
      before.link = null;
      live.put(worker.id(), this);
      link.onBroken(cause -> vertx.runOnContext(ignored -> lost(cause)));
      int pendingBefore = link.pendingCalls();
      List<String> stop = link.resume(response,
          new java.util.HashSet<>(registration.getRunningTaskIdsList()));
      worker.drain(before.drainedBefore);
      // No GivenUpCalls here: the calls given up while it was parked ended or were cancelled
      // (none was requeued: that happens only past the grace), so none comes back here as a
      // new attempt; and an end the old stream delivered is not sent again.
      accept(registration, stop, link.receivedSeq());
      reregisterHeld(registration);
      link.flushOwed();
      LOG.info(() -> "worker " + worker.id() + " reattached from " + registration.getHost()
          + ": " + link.pendingCalls() + " of its " + pendingBefore + " calls still running"
          + (stop.isEmpty() ? "" : ", " + stop.size() + " given up here (it stops them)") + ", "
          + registration.getHeldObjectsCount() + " objects held");
    }

    private void accept(RegisterWorker registration, List<String> stopTaskIds,
        long receivedSeq) {
      // A fresh key for the worker's own data port at every (re)attach (docs/data-plane.md).
      byte[] directKey = plane.objects().direct().attach(worker.id(),
          registration.getDirectHost(), registration.getDirectPort(),
          registration.getDirectTlsFingerprint(),
          // Only a worker known by its certificate serves that certificate on its port.
          certifiedId != null && registration.getDirectTlsWorkerCertificate());
      response.write(HeadMessage.newBuilder().setAccepted(WorkerAccepted.newBuilder()
          .setWorkerId(worker.id()).setClusterId(clusterId).setInlineLimitBytes(inlineLimit)
          .setMaxMessageBytes(maxMessage).setHeartbeatSeconds(HEARTBEAT_MILLIS / 1000.0)
          .addAllStopTaskIds(stopTaskIds).setReceivedSeq(receivedSeq)
          .setDirectTicketKey(com.google.protobuf.ByteString.copyFrom(directKey)))
          .build());
      watchdog = vertx.setPeriodic(WATCHDOG_MILLIS, id -> {
        java.time.Instant until = certifiedId == null ? null : certifiedUntil.get(certifiedId);
        if (certifiedId != null && (until == null || until.isBefore(java.time.Instant.now()))) {
          String why = "holds no valid certificate (it expired and was not renewed)";
          gone(why);
          end(GrpcStatus.UNAUTHENTICATED, "worker " + certifiedId + " " + why);
          return;
        }
        if ((System.nanoTime() - lastHeard) / 1_000_000 > SILENCE_LIMIT_MILLIS) {
          lost("sent no heartbeat for " + SILENCE_LIMIT_MILLIS / 1000 + " s");
          end(GrpcStatus.UNAVAILABLE, "no heartbeat for " + SILENCE_LIMIT_MILLIS / 1000 + " s");
        }
      });
    }

    private static Map<String, List<Integer>> reportedGpus(RegisterWorker registration) {
      Map<String, List<Integer>> gpus = new HashMap<>();
      registration.getReattachedCallGpusList().forEach(call ->
          gpus.put(call.getTaskId(), List.copyOf(call.getGpuIdsList())));
      return gpus;
    }

    private static java.util.Set<ObjectKey> heldKeys(RegisterWorker registration) {
      java.util.Set<ObjectKey> keys = new java.util.HashSet<>();
      for (HeldObject held : registration.getHeldObjectsList()) {
        try {
          keys.add(ObjectKey.of(held.getNamespace(), held.getId()));
        } catch (IllegalArgumentException malformed) {
          // Names no object: ignored, as in a call's report.
        }
      }
      return keys;
    }

    private void reregisterHeld(RegisterWorker registration) {
      for (HeldObject held : registration.getHeldObjectsList()) {
        try {
          plane.objects().held(worker.id(), ObjectKey.of(held.getNamespace(), held.getId()),
              held.getSize());
        } catch (IllegalArgumentException malformed) {
          // Names no object: ignored, as in a call's report.
        }
      }
    }

    /**
     * The link broke (connection lost, no heartbeat): the worker keeps its calls for the grace
     * period, taking no new ones, in case it reattaches; then it is gone.
     */
    void lost(String cause) {
      if (worker == null || link == null || parked.get(worker.id()) == this) {
        return;
      }
      cancelWatchdog();
      live.remove(worker.id(), this);
      if (grace.isZero()) {
        gone(cause);
        return;
      }
      link.suspend();
      drainedBefore = worker.drainReason();
      worker.drain("its link broke; waiting " + seconds(grace) + " for it to reattach");
      parked.put(worker.id(), this);
      graceTimer = vertx.setTimer(Math.max(1, grace.toMillis()), id -> {
        if (worker != null && parked.remove(worker.id(), this)) {
          gone(cause + ", and did not reattach within " + seconds(grace)
              + " (--link-loss-grace)");
        }
      });
      LOG.info("worker " + worker.id() + " " + cause + "; its " + link.pendingCalls()
          + " calls wait up to " + seconds(grace) + " for it to reattach");
    }

    private void cancelWatchdog() {
      if (watchdog >= 0) {
        vertx.cancelTimer(watchdog);
        watchdog = -1;
      }
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
      cancelWatchdog();
      if (worker == null || link == null) {
        return;
      }
      parked.remove(worker.id(), this);
      live.remove(worker.id(), this);
      AttachedWorker leaving = worker;
      worker = null;
      String why = "worker " + leaving.id() + " (" + leaving.host() + ") " + cause;
      link.close(why);
      plane.detach(leaving, cause);
      LOG.info(() -> "worker " + leaving.id() + " detached: " + cause);
    }
  }

  /**
   * Tells {@code then} (on the loop), a moment from now, whether every journal record appended
   * by then is on disk: a call's end reaches the journal a loop turn or two after its message,
   * so the mark is taken a moment later.
   */
  private void whenJournaled(java.util.function.Consumer<Boolean> then) {
    io.vertx.core.Context loop = vertx.getOrCreateContext(); // the control plane's: called there
    vertx.setTimer(ACK_BATCH_MILLIS, id -> plane.journaling().durable(
        plane.journaling().mark()).whenComplete((ok, failed) ->
            loop.runOnContext(ignored -> then.accept(failed == null))));
  }

  private static String seconds(java.time.Duration duration) {
    return dev.bulletin.protocol.Text.number(duration.toMillis() / 1000.0) + " s";
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
    String certified = identity.certifiedWorkerId().orElse(null);
    if (certified != null) {
      // The link lives as long as the worker's newest certificate: the one it presented, or
      // a later one it renewed to.
      var chain = Authenticator.peerChain(request.connection());
      if (!chain.isEmpty() && chain.get(0) instanceof java.security.cert.X509Certificate leaf) {
        renewed(certified, leaf.getNotAfter().toInstant());
      }
    }
    Attachment attachment = new Attachment(request.response(), certified);
    // Headers go out with the acceptance: a refusal before it keeps its status message.
    request.handler(attachment::onMessage);
    request.endHandler(ignored -> {
      attachment.gone("ended its stream");
      attachment.end(GrpcStatus.OK, "");
    });
    request.exceptionHandler(error -> attachment.lost("lost its connection: " + error));
    // A stream the worker reset (RST_STREAM) reaches the error handler only, not the exception
    // handlers: without it a worker that cancelled its link was noticed by the heartbeat alone.
    request.errorHandler(error -> attachment.lost("reset its link (" + error + ")"));
    request.response().exceptionHandler(error -> attachment.lost("lost its connection: " + error));
  }
}
