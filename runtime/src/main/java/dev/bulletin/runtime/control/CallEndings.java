package dev.bulletin.runtime.control;

import com.google.protobuf.UnsafeByteOperations;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.protocol.FailureCode;
import dev.bulletin.protocol.ObjectRef;
import dev.bulletin.protocol.RuntimeTimings;
import dev.bulletin.protocol.Text;
import dev.bulletin.runtime.api.ClientSession;
import dev.bulletin.runtime.api.TaskEvents;
import dev.bulletin.runtime.objects.ObjectDirectory;
import dev.bulletin.runtime.task.StopReason;
import dev.bulletin.runtime.task.Task;
import dev.bulletin.runtime.task.TaskState;
import dev.bulletin.runtime.task.TaskTable;
import dev.bulletin.worker.CallOutcome;

/**
 * A call's last word: its outcome on a worker (returned, died, lost, stopped) turned into the
 * final event its session gets, in words that say what happened and what to do, with its
 * timings; a large result stays in the store, held by the session.
 */
final class CallEndings {

  private final TaskTable tasks;
  private final ObjectDirectory objects;
  private final Journaling journaling;
  private final ObjectStore store;
  private final long inlineLimit;

  CallEndings(TaskTable tasks, ObjectDirectory objects, Journaling journaling, ObjectStore store,
      long inlineLimit) {
    this.tasks = tasks;
    this.objects = objects;
    this.journaling = journaling;
    this.store = store;
    this.inlineLimit = inlineLimit;
  }

  /** Tells the call's session (and the journal) how it ended, as its final event. */
  void finish(Task task, CallOutcome outcome) {
    double runSeconds = outcome instanceof CallOutcome.Returned r ? r.runSeconds() : 0;
    RuntimeTimings timings = timings(task, runSeconds);
    if (outcome instanceof CallOutcome.Returned returned) {
      tasks.transition(task, returned.raised() ? TaskState.ERROR : TaskState.FINISHED,
          TaskEvents.result(task.id(), resultRef(task, returned), returned.raised(), timings));
    } else if (outcome instanceof CallOutcome.ExecutorDied died) {
      tasks.transition(task, TaskState.ERROR, TaskEvents.failed(task.id(),
          FailureCode.EXECUTOR_DIED, "the executor running " + task.name() + "() died: "
              + died.cause() + ". It has been replaced; the cluster keeps serving other calls.",
          timings));
    } else if (outcome instanceof CallOutcome.Undelivered) {
      tasks.transition(task, TaskState.CANCELLED, TaskEvents.cancelled(task.id(),
          "the call was " + task.stopReason().describe() + " before it reached a worker"));
    } else if (outcome instanceof CallOutcome.WorkerLost lost) {
      if (task.stopReason() != null) {
        tasks.transition(task, TaskState.CANCELLED, TaskEvents.cancelled(task.id(),
            "the call was " + task.stopReason().describe() + " while its worker went away"));
        return;
      }
      tasks.transition(task, TaskState.ERROR, TaskEvents.failed(task.id(),
          FailureCode.WORKER_LOST, "the worker running " + task.name() + "() went away: "
              + lost.cause() + (task.requeues() > 0 ? " (after "
              + Text.count(task.requeues(), "earlier attempt") + ")" : "")
              + ". Pass retries=N to run such calls again on another worker.", timings));
    } else if (outcome instanceof CallOutcome.Stopped stopped) {
      // Decided by why the runtime stopped it; a stop it did not ask for (the worker shutting
      // down) ends as cancelled with the worker's words.
      if (task.stopReason() instanceof StopReason.TimedOut timedOut) {
        tasks.transition(task, TaskState.ERROR, TaskEvents.failed(task.id(),
            FailureCode.TIMED_OUT, task.name() + "() was " + timedOut.describe()
                + "; pass a longer timeout= if it needs more", timings));
      } else {
        String why = task.stopReason() != null ? task.stopReason().describe() : stopped.reason();
        tasks.transition(task, TaskState.CANCELLED, TaskEvents.cancelled(task.id(),
            "the call was " + why + " while running; its executor was replaced"));
      }
    }
  }

  /**
   * Small results travel inside the event; large ones stay in the store, held by the session,
   * until the client fetches them (or passes them to another call) and releases them.
   */
  private ObjectRef resultRef(Task task, CallOutcome.Returned returned) {
    ObjectRef.Builder ref = ObjectRef.newBuilder().setId(returned.result().id().hex())
        .setSize(returned.size());
    if (returned.size() <= inlineLimit || !(task.sink() instanceof ClientSession session)
        || !session.isOpen()) {
      if (returned.size() <= inlineLimit) {
        // The bytes that came with the end, where they did: reading back the file just
        // written was 5 % of the event loop per call (make bench-scale). readSmall's array is
        // a copy of our own: wrapped, not copied again.
        ref.setInlineData(returned.bytes().size() == returned.size() ? returned.bytes()
            : UnsafeByteOperations.unsafeWrap(store.readSmall(returned.result())));
      }
      objects.release(returned.result());
    } else {
      objects.keptOnly(returned.result()).ifPresent(kept -> journaling.resultKept(
          returned.result(), kept.workerId(), kept.size(), kept.kind()));
      session.holds().adopt(returned.result());
    }
    return ref.build();
  }

  static RuntimeTimings timings(Task task, double runSeconds) {
    long now = System.nanoTime();
    return RuntimeTimings.newBuilder().setQueueSeconds(task.queueSeconds(now))
        .setStartSeconds(task.startSeconds(now)).setRunSeconds(runSeconds)
        .setHeldSeconds(task.heldSeconds(now)).build();
  }
}
