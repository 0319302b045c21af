package dev.bulletin.runtime.workers;

import dev.bulletin.runtime.objects.ObjectDirectory;
import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.protocol.CallEnded;
import dev.bulletin.protocol.DropObjects;
import dev.bulletin.protocol.DropResident;
import dev.bulletin.protocol.HeadBatch;
import dev.bulletin.protocol.HeadMessage;
import dev.bulletin.protocol.HeldObject;
import dev.bulletin.protocol.OutputStream;
import dev.bulletin.protocol.ReadyBatch;
import dev.bulletin.protocol.ReportsReceived;
import dev.bulletin.protocol.RunCall;
import dev.bulletin.protocol.SendObject;
import dev.bulletin.protocol.StopCall;
import dev.bulletin.protocol.WorkerMessage;
import dev.bulletin.worker.CallListener;
import dev.bulletin.worker.CallOutcome;
import dev.bulletin.worker.CallRequest;
import dev.bulletin.worker.WorkerStatusView;
import io.vertx.grpc.server.GrpcServerResponse;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.function.Consumer;

/**
 * The runtime's end of a remote worker's Attach stream. Calls go down as {@link RunCall} with
 * small objects inline (a worker fetches larger ones from the runtime's store); progress comes
 * back as worker messages. A large result stays in the worker's store: the link records it in the
 * {@link ObjectDirectory}, which asks for it ({@link SendObject}) and drops it
 * ({@link DropObjects}) through this link. Runs on the control plane's event loop.
 */
public final class RemoteWorkerLink implements WorkerLink {

  private record Pending(CompletableFuture<CallOutcome> outcome, CallListener listener,
      String namespace) {}

  /** Messages kept for a worker whose link broke, sent when it reattaches. */
  private static final int OWED_LIMIT = 100_000;

  private final String workerId;
  private GrpcServerResponse<WorkerMessage, HeadMessage> stream;
  /** What leaves for the worker in this turn of the loop: one message, or one batch. */
  private final ReadyBatch<HeadMessage> outbox;
  private final ObjectDirectory objects;
  private final Map<String, Pending> pending = new HashMap<>();
  /** The calls as this worker gets them (each function's bytes once). */
  private final RunCalls runCalls;
  /** Told (once, later on the loop) when a write finds the stream broken. */
  private Consumer<String> broken;
  private int storeReferenced;
  private boolean closed;
  private final ReportedGpuUsage usage = new ReportedGpuUsage();
  /** The link broke and the worker may reattach: messages wait in owed, calls keep pending. */
  private boolean suspended;
  private final java.util.ArrayDeque<HeadMessage> owed = new java.util.ArrayDeque<>();
  private long receivedSeq;
  private GivenUpCalls givenUp = GivenUpCalls.none();
  /**
   * Runs its argument on the loop with true once every journal record appended so far is on
   * disk (false: it could not be written). What arrived is acknowledged to the worker only
   * then: until, it keeps each report, to send it again should this runtime crash before its
   * journal had the call's end.
   */
  private java.util.function.Consumer<java.util.function.Consumer<Boolean>> whenJournaled =
      then -> then.accept(true);

  /** As below, each message written at once (no later turn to wait for). */
  RemoteWorkerLink(String workerId, GrpcServerResponse<WorkerMessage, HeadMessage> stream,
      ObjectDirectory objects, long inlineLimit, Consumer<String> broken) {
    this(workerId, stream, objects, inlineLimit, broken, Runnable::run);
  }

  /**
   * @param broken detaches the worker when a write finds its stream broken
   * @param afterTurn runs a task on the loop once the work queued there now is done: the
   *     messages made until then leave as one
   */
  RemoteWorkerLink(String workerId, GrpcServerResponse<WorkerMessage, HeadMessage> stream,
      ObjectDirectory objects, long inlineLimit, Consumer<String> broken, Executor afterTurn) {
    this.workerId = workerId;
    this.outbox = new ReadyBatch<>(afterTurn,
        messages -> HeadMessage.newBuilder().setBatch(HeadBatch.newBuilder()
            .addAllMessages(messages)).build(),
        message -> stream().write(message), this::unwritten);
    this.stream = stream;
    this.broken = broken;
    this.objects = objects;
    this.runCalls = new RunCalls(workerId, objects, inlineLimit);
  }

  @Override
  public dev.bulletin.worker.GpuUsage usage() {
    return usage;
  }

  /** References in the worker's own store, as its last heartbeat said. */
  public int storeReferenced() {
    return storeReferenced;
  }

  @Override
  public CompletableFuture<CallOutcome> run(CallRequest request, CallListener listener) {
    CompletableFuture<CallOutcome> outcome = new CompletableFuture<>();
    if (closed || suspended) {
      outcome.complete(new CallOutcome.Undelivered(closed ? "the worker had already gone away"
          : "the worker's link is broken"));
      return outcome;
    }
    RunCall run = runCalls.of(request);
    // Pending first: a write that finds the stream broken hands the call back as undelivered.
    pending.put(request.taskId(), new Pending(outcome, listener, request.args().namespace()));
    outbox.add(HeadMessage.newBuilder().setRun(run).build());
    return outcome;
  }

  @Override
  public CompletableFuture<CallOutcome> adopt(String taskId, String namespace,
      CallListener listener) {
    CompletableFuture<CallOutcome> outcome = new CompletableFuture<>();
    if (closed) {
      outcome.complete(new CallOutcome.WorkerLost("the worker had already gone away"));
    } else {
      pending.put(taskId, new Pending(outcome, listener, namespace));
    }
    return outcome;
  }

  @Override
  public void stop(String taskId, String reason) {
    if (pending.containsKey(taskId)) {
      send(HeadMessage.newBuilder().setStop(StopCall.newBuilder().setTaskId(taskId)
          .setReason(reason)).build());
    }
  }

  @Override
  public void preempt(String taskId, String reason, java.time.Duration grace) {
    if (pending.containsKey(taskId)) {
      send(HeadMessage.newBuilder().setStop(StopCall.newBuilder().setTaskId(taskId)
          .setReason(reason).setGraceSeconds(Math.max(0.001, grace.toMillis() / 1000.0))).build());
    }
  }

  @Override
  public void sendObject(ObjectKey key) {
    send(HeadMessage.newBuilder().setSend(SendObject.newBuilder()
        .setNamespace(key.namespace()).setId(key.id().hex())).build());
  }

  @Override
  public void dropResident(String namespace, String session, boolean ended) {
    send(HeadMessage.newBuilder().setDropResident(DropResident.newBuilder()
        .setNamespace(namespace).setSession(session).setEnded(ended)).build());
  }

  @Override
  public void forgetSpill(ObjectKey spill, String why) {
    send(HeadMessage.newBuilder().setForgetSpill(dev.bulletin.protocol.ForgetSpill.newBuilder()
        .setNamespace(spill.namespace()).setId(spill.id().hex()).setWhy(why)).build());
  }

  @Override
  public void dropObjects(String namespace, List<ObjectKey> keys) {
    DropObjects.Builder drop = DropObjects.newBuilder().setNamespace(namespace);
    keys.forEach(key -> drop.addIds(key.id().hex()));
    send(HeadMessage.newBuilder().setDrop(drop).build());
  }

  @Override
  public WorkerStatusView status() {
    // The remote agent's executors are its own business; the runtime sees its calls.
    return new WorkerStatusView(pending.size(), 0, 0);
  }

  /** How the link learns that what it received is journaled (see {@link #whenJournaled}). */
  void acknowledgeWhen(
      java.util.function.Consumer<java.util.function.Consumer<Boolean>> whenJournaled) {
    this.whenJournaled = whenJournaled;
  }

  /** The last report of the worker that arrived here (WorkerMessage.seq): for its reattach. */
  long receivedSeq() {
    return receivedSeq;
  }

  /** A progress message from the worker. */
  /** Calls the worker runs (or ran) that the runtime gave up while its link was down. */
  void givenUp(GivenUpCalls calls) {
    givenUp = calls;
  }

  void onMessage(WorkerMessage message) {
    if (message.hasBatch()) {
      for (WorkerMessage one : message.getBatch().getMessagesList()) {
        if (!one.hasBatch()) { // never nested: a batch inside is malformed, and skipped
          onMessage(one);
        }
      }
      return;
    }
    long seq = message.getSeq();
    if (seq != 0) {
      if (seq <= receivedSeq) {
        return; // sent again after a reattach, and had arrived before the link broke
      }
      receivedSeq = seq;
    }
    if (message.hasStarted()) {
      Pending call = pending.get(message.getStarted().getTaskId());
      if (call != null && !givenUp.refuses(message.getStarted().getTaskId())) {
        call.listener().started(message.getStarted().getExecutorId());
      }
    } else if (message.hasOutput()) {
      Pending call = pending.get(message.getOutput().getTaskId());
      if (call != null && !givenUp.refuses(message.getOutput().getTaskId())) {
        call.listener().output(message.getOutput().getOutput().getStream() == OutputStream.STDERR,
            message.getOutput().getOutput().getData().toByteArray());
      }
    } else if (message.hasEnded()) {
      ended(message.getEnded());
    } else if (message.hasHeartbeat()) {
      // What arrived is acknowledged once a heartbeat (the worker's copy stays bounded), once
      // the journal has what it changed: a call's end must survive a crash here, or the
      // worker must still hold it to send again (docs/durability.md).
      long arrived = receivedSeq;
      whenJournaled.accept(journaled -> {
        if (journaled) {
          write(HeadMessage.newBuilder().setReceived(ReportsReceived.newBuilder()
              .setSeq(arrived)).build());
        }
      });
      storeReferenced = message.getHeartbeat().getStoreReferenced();
      usage.heartbeat(message.getHeartbeat());
      for (HeldObject gone : message.getHeartbeat().getDroppedList()) {
        ReportedEnd.keyOf(gone).ifPresent(key -> objects.dropped(workerId, key));
      }
    } else if (message.hasResidentSpilled()) {
      // Kept here for the runtime as a kept result is: another worker may fetch it.
      HeldObject spill = message.getResidentSpilled().getObject();
      ReportedEnd.keyOf(spill).ifPresent(key -> objects.residents().spilled(workerId, true, key,
          spill.getSize(), spill.getKind(), message.getResidentSpilled().getHandlesMap()));
    } else if (message.hasResidentSpillGone()) {
      var gone = message.getResidentSpillGone();
      ReportedEnd.keyOf(HeldObject.newBuilder().setNamespace(gone.getNamespace()).setId(gone.getId())
          .build()).ifPresent(key -> objects.residents().gone(workerId, key));
    } else if (message.hasUnavailable()) {
      var unavailable = message.getUnavailable();
      try {
        objects.unavailable(workerId, ObjectKey.of(unavailable.getNamespace(),
            unavailable.getId()), unavailable.getReason());
      } catch (IllegalArgumentException ignored) {
        // Names no object the runtime asked for.
      }
    }
  }

  private void ended(CallEnded ended) {
    for (HeldObject held : ended.getHeldList()) {
      ReportedEnd.keyOf(held).ifPresent(key -> objects.held(workerId, key, held.getSize()));
    }
    Pending call = givenUp.refusesEnd(ended.getTaskId()) ? null
        : pending.remove(ended.getTaskId());
    if (call != null) {
      usage.ended(ended);
      call.outcome().complete(ReportedEnd.outcome(ended, call.namespace(), workerId, objects));
    } else if (ended.hasReturned() && ended.getReturned().getKept()) {
      // No call waits for it (it was given up here): the worker need not keep it, unless
      // this is an end sent again whose result the runtime already keeps there.
      ReportedEnd.keyOf(ended.getHeldList().stream().filter(h -> h.getId().equals(
          ended.getReturned().getResult().getId())).findFirst().orElse(null))
          .filter(key -> !objects.keptOn(workerId, key))
          .ifPresent(key -> dropObjects(key.namespace(), List.of(key)));
    }
  }

  @Override
  public void detach(String cause) {
    close(cause);
  }

  /** The worker went away: every call it had ends as lost. Idempotent. */
  void close(String cause) {
    if (closed) {
      return;
    }
    closed = true;
    owed.clear();
    outbox.drain();
    Map<String, Pending> lost = new HashMap<>(pending);
    pending.clear();
    lost.values().forEach(call -> call.outcome().complete(new CallOutcome.WorkerLost(cause)));
  }

  /**
   * Queues a message for the worker (it leaves with the others of this turn); false if its
   * stream is known broken. A write that finds it broken later hands the messages to
   * {@link #unwritten}.
   */
  private boolean write(HeadMessage message) {
    if (suspended || closed) {
      return false;
    }
    outbox.add(message);
    return true;
  }

  private GrpcServerResponse<WorkerMessage, HeadMessage> stream() {
    if (suspended || closed) {
      throw new IllegalStateException("the link is " + (closed ? "closed" : "suspended"));
    }
    return stream;
  }

  /**
   * A write found the stream broken (then the attachment hears of it, later on the loop, and
   * parks the worker for its grace period or detaches it): its calls never reached the worker
   * and go back as undelivered; its other messages wait for a reattach, in their order, ahead
   * of those that waited since.
   */
  private void unwritten(List<HeadMessage> messages, RuntimeException why) {
    if (!suspended && !closed) {
      suspended = true;
      broken.accept("lost its connection: " + why.getMessage());
    }
    for (int i = messages.size() - 1; i >= 0; i--) {
      HeadMessage message = messages.get(i);
      if (message.hasRun()) {
        Pending call = pending.remove(message.getRun().getTaskId());
        if (call != null) {
          call.outcome().complete(new CallOutcome.Undelivered("its connection broke before the"
              + " call reached it"));
        }
      } else if (!closed && owed.size() < OWED_LIMIT) {
        owed.addFirst(message);
      }
    }
  }

  /** A message that may wait for a reattach (stops, object requests), unlike a call. */
  private void send(HeadMessage message) {
    if (!write(message) && !closed && owed.size() < OWED_LIMIT) {
      owed.addLast(message);
    }
  }

  /** Who hears that a write found the stream broken (the worker's current attachment). */
  void onBroken(Consumer<String> broken) {
    this.broken = broken;
  }

  // ---- a worker whose link broke, and its reattach ------------------------------------------

  /** The link broke: calls stay pending (their worker may still run them), messages wait. */
  void suspend() {
    suspended = true;
    outbox.flush(); // finds the link suspended: calls undelivered, the rest owed
  }

  int pendingCalls() {
    return pending.size();
  }

  /**
   * The worker reattached on a new stream and reported the calls it still has: those pending
   * here that it does not report are lost (their end never came); those it reports that are not
   * pending here were given up meanwhile, and are returned for the worker to stop.
   */
  List<String> resume(GrpcServerResponse<WorkerMessage, HeadMessage> newStream,
      Set<String> reported) {
    stream = newStream;
    suspended = false;
    for (String taskId : List.copyOf(pending.keySet())) {
      if (!reported.contains(taskId)) {
        pending.remove(taskId).outcome().complete(new CallOutcome.WorkerLost("worker "
            + workerId + " reattached without it (its executor or its report was lost)"));
      }
    }
    return reported.stream().filter(id -> !pending.containsKey(id)).toList();
  }

  /** Sends what waited while the link was broken; after the reattach's acceptance. */
  void flushOwed() {
    while (!owed.isEmpty() && write(owed.peekFirst())) {
      owed.removeFirst();
    }
    outbox.flush(); // now: what waited goes before anything of the next turn
  }
}
