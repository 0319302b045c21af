package dev.bulletin.runtime.impl;

import com.google.protobuf.ByteString;
import dev.bulletin.bridge.ObjectId;
import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.bridge.ObjectStoreException;
import dev.bulletin.protocol.CallEnded;
import dev.bulletin.protocol.CallReturned;
import dev.bulletin.protocol.HeadMessage;
import dev.bulletin.protocol.ObjectRef;
import dev.bulletin.protocol.OutputStream;
import dev.bulletin.protocol.RunCall;
import dev.bulletin.protocol.StopCall;
import dev.bulletin.protocol.WorkerMessage;
import dev.bulletin.worker.CallListener;
import dev.bulletin.worker.CallOutcome;
import dev.bulletin.worker.CallRequest;
import dev.bulletin.worker.WorkerStatusView;
import io.vertx.grpc.server.GrpcServerResponse;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.function.Predicate;

/**
 * The runtime's end of a remote worker's Attach stream. Calls go down as {@link RunCall} with
 * small objects inline (a worker fetches larger ones with GetObject); progress comes back as
 * worker messages. Runs on the control plane's event loop.
 */
final class RemoteWorkerLink implements WorkerLink {

  private record Pending(CompletableFuture<CallOutcome> outcome, CallListener listener,
      String namespace) {}

  private final GrpcServerResponse<WorkerMessage, HeadMessage> stream;
  private final ObjectStore store;
  private final long inlineLimit;
  /** Takes over the reference a worker's PutObject made for a large result. */
  private final Predicate<ObjectKey> claimUpload;
  private final Map<String, Pending> pending = new HashMap<>();
  /** Functions this worker already holds: later calls send their id only. */
  private final Set<ObjectKey> functionsSent = new HashSet<>();
  private boolean closed;

  RemoteWorkerLink(GrpcServerResponse<WorkerMessage, HeadMessage> stream, ObjectStore store,
      long inlineLimit, Predicate<ObjectKey> claimUpload) {
    this.stream = stream;
    this.store = store;
    this.inlineLimit = inlineLimit;
    this.claimUpload = claimUpload;
  }

  @Override
  public CompletableFuture<CallOutcome> run(CallRequest request, CallListener listener) {
    CompletableFuture<CallOutcome> outcome = new CompletableFuture<>();
    if (closed) {
      outcome.complete(new CallOutcome.WorkerLost("the worker had already gone away"));
      return outcome;
    }
    pending.put(request.taskId(), new Pending(outcome, listener, request.args().namespace()));
    boolean functionKnown = !functionsSent.add(request.function());
    RunCall.Builder run = RunCall.newBuilder().setTaskId(request.taskId())
        .setFunction(ref(request.function(), !functionKnown))
        .setArgs(ref(request.args(), true)).addAllGpuIds(request.gpuIds())
        .setNamespace(request.args().namespace());
    request.refs().forEach(key -> run.addRefs(ref(key, false)));
    send(HeadMessage.newBuilder().setRun(run).build());
    return outcome;
  }

  /** The object's id and size, and its bytes when small enough and {@code withBytes}. */
  private ObjectRef ref(ObjectKey id, boolean withBytes) {
    long size = store.size(id);
    ObjectRef.Builder ref = ObjectRef.newBuilder().setId(id.id().hex()).setSize(size);
    if (withBytes && size <= inlineLimit) {
      ref.setInlineData(ByteString.copyFrom(store.readSmall(id)));
    }
    return ref.build();
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
  public WorkerStatusView status() {
    // The remote agent's executors are its own business; the runtime sees its calls.
    return new WorkerStatusView(pending.size(), 0, 0);
  }

  /** A progress message from the worker. */
  void onMessage(WorkerMessage message) {
    if (message.hasStarted()) {
      Pending call = pending.get(message.getStarted().getTaskId());
      if (call != null) {
        call.listener().started(message.getStarted().getExecutorId());
      }
    } else if (message.hasOutput()) {
      Pending call = pending.get(message.getOutput().getTaskId());
      if (call != null) {
        call.listener().output(message.getOutput().getOutput().getStream() == OutputStream.STDERR,
            message.getOutput().getOutput().getData().toByteArray());
      }
    } else if (message.hasEnded()) {
      Pending call = pending.remove(message.getEnded().getTaskId());
      if (call != null) {
        call.outcome().complete(outcome(message.getEnded(), call.namespace()));
      }
    }
  }

  private CallOutcome outcome(CallEnded ended, String namespace) {
    switch (ended.getOutcomeCase()) {
      case RETURNED -> {
        return returned(ended.getReturned(), namespace);
      }
      case EXECUTOR_DIED -> {
        return new CallOutcome.ExecutorDied(ended.getExecutorDied());
      }
      case STOPPED -> {
        return new CallOutcome.Stopped(ended.getStopped());
      }
      case FAILED -> {
        return new CallOutcome.WorkerLost(ended.getFailed());
      }
      default -> {
        return new CallOutcome.WorkerLost("the worker sent an ending this runtime does not know;"
            + " are the worker and runtime versions the same?");
      }
    }
  }

  private CallOutcome returned(CallReturned returned, String namespace) {
    ObjectRef ref = returned.getResult();
    try {
      ObjectKey id = new ObjectKey(namespace, ObjectId.parse(ref.getId()));
      if (!ref.getInlineData().isEmpty() || ref.getSize() == 0) {
        store.put(id, ref.getInlineData().asReadOnlyByteBuffer());
      } else {
        if (!claimUpload.test(id)) {
          return new CallOutcome.WorkerLost("the worker reported a result (" + id + ") it did not"
              + " upload");
        }
      }
      return new CallOutcome.Returned(id, ref.getSize(), returned.getRaised(),
          returned.getRunSeconds());
    } catch (IllegalArgumentException | ObjectStoreException e) {
      return new CallOutcome.WorkerLost("its result could not be stored: " + e.getMessage());
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
    Map<String, Pending> lost = new HashMap<>(pending);
    pending.clear();
    lost.values().forEach(call -> call.outcome().complete(new CallOutcome.WorkerLost(cause)));
  }

  private void send(HeadMessage message) {
    try {
      stream.write(message);
    } catch (IllegalStateException streamGone) {
      close("its connection broke");
    }
  }
}
