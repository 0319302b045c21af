package dev.bulletin.runtime.impl;

import com.google.protobuf.ByteString;
import dev.bulletin.bridge.ObjectId;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.bridge.ObjectStoreException;
import dev.bulletin.protocol.FailureCode;
import dev.bulletin.protocol.ObjectRef;
import dev.bulletin.protocol.RuntimeTimings;
import dev.bulletin.protocol.TaskSpec;
import dev.bulletin.runtime.scheduler.Decision;
import dev.bulletin.runtime.scheduler.Demand;
import dev.bulletin.runtime.scheduler.Scheduler;
import dev.bulletin.runtime.scheduler.WorkerSlots;
import dev.bulletin.runtime.task.Task;
import dev.bulletin.runtime.task.TaskState;
import dev.bulletin.runtime.task.TaskTable;
import dev.bulletin.worker.CallListener;
import dev.bulletin.worker.CallOutcome;
import dev.bulletin.worker.CallRequest;
import io.vertx.core.Context;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * The runtime's state and the rules that change it: accepting calls, placing them through the
 * scheduler on the attached workers, handing them over and turning outcomes into events. Every
 * method runs on one Vert.x event loop ({@code context}); worker callbacks hop back onto it.
 */
final class ControlPlane {

  static final String CANCELLED_BY_USER = "cancelled by its caller";
  static final String CLIENT_WENT_AWAY = "its client disconnected";
  static final String TIMEOUT_PREFIX = "stopped after its timeout";

  private final Context context;
  private final ObjectStore store;
  private final Scheduler scheduler;
  private final long inlineLimit;
  private final double drainMarginSeconds;
  private final TaskTable tasks = new TaskTable();
  /** Attached workers in the order they joined (first fit prefers the earliest). */
  private final Map<String, AttachedWorker> workers = new LinkedHashMap<>();
  /** Where each placed or running call runs; its slots go back to that worker when it ends. */
  private final Map<String, AttachedWorker> placements = new HashMap<>();
  private List<WorkerSlots> potential = List.of();
  /** Uploaded objects not yet claimed by a task, with the references PutObject took. */
  private final Map<ObjectId, Integer> unclaimedUploads = new HashMap<>();
  /** Results too large to inline, held until the client fetches them. */
  private final Map<ObjectId, Integer> resultsAwaitingFetch = new HashMap<>();
  private final Map<String, Long> timeoutTimers = new HashMap<>();
  private int runningCount;

  /**
   * @param drainMarginSeconds a worker whose allocation ends sooner than this takes no call
   *     without a timeout (a call with one goes there only if it can finish in time)
   */
  ControlPlane(Context context, ObjectStore store, Scheduler scheduler, long inlineLimit,
      double drainMarginSeconds) {
    this.context = context;
    this.store = store;
    this.scheduler = scheduler;
    this.inlineLimit = inlineLimit;
    this.drainMarginSeconds = drainMarginSeconds;
  }

  /** The runtime's object store: every call's function and arguments are in it. */
  ObjectStore store() {
    return store;
  }

  TaskTable tasks() {
    return tasks;
  }

  Scheduler scheduler() {
    return scheduler;
  }

  Collection<AttachedWorker> workers() {
    return List.copyOf(workers.values());
  }

  double drainMarginSeconds() {
    return drainMarginSeconds;
  }

  /** Every worker's slots, draining ones too: what could run a call at all. */
  List<WorkerSlots> allSlots() {
    return workers.values().stream().map(AttachedWorker::slots).toList();
  }

  /**
   * Workers that pools could start (one idle worker per pool shape): a call only they could run
   * waits for one instead of failing as infeasible.
   */
  void potentialWorkers(List<WorkerSlots> shapes) {
    potential = List.copyOf(shapes);
  }

  private List<WorkerSlots> feasibilitySlots() {
    if (potential.isEmpty()) {
      return allSlots();
    }
    List<WorkerSlots> all = new ArrayList<>(allSlots());
    all.addAll(potential);
    return all;
  }

  Optional<AttachedWorker> worker(String workerId) {
    return Optional.ofNullable(workers.get(workerId));
  }

  // ---- workers ---------------------------------------------------------------------------

  /** @return false if a worker with this id is already attached */
  boolean attach(AttachedWorker worker) {
    if (workers.putIfAbsent(worker.id(), worker) != null) {
      return false;
    }
    schedule();
    return true;
  }

  /** Stops using a worker its pool is stopping: its calls end as lost (requeued with retries). */
  void forget(String workerId, String cause) {
    AttachedWorker worker = workers.get(workerId);
    if (worker != null) {
      worker.link().detach(cause);
      detach(worker);
    }
  }

  boolean isAttached(String workerId) {
    return workers.containsKey(workerId);
  }

  /**
   * Forgets a worker that went away. Its link has already ended the calls it ran (as
   * {@link CallOutcome.WorkerLost}); they are requeued or failed as those outcomes arrive.
   */
  void detach(AttachedWorker worker) {
    workers.remove(worker.id(), worker);
    schedule();
  }

  int runningCount() {
    return runningCount;
  }

  // ---- accepting calls -------------------------------------------------------------------

  void submit(ClientSession session, TaskSpec spec) {
    String taskId = spec.getTaskId();
    if (taskId.isBlank()) {
      session.send(TaskEvents.failed("", FailureCode.INVALID_REQUEST,
          "a submitted call needs a task_id", RuntimeTimings.getDefaultInstance()));
      return;
    }
    if (tasks.get(taskId).isPresent()) {
      reject(session, taskId, "task id " + taskId + " is already in use; ids must be unique");
      return;
    }
    if (spec.getTimeoutSeconds() < 0) {
      reject(session, taskId, "timeout must be >= 0 seconds, got " + spec.getTimeoutSeconds());
      return;
    }
    Demand demand;
    ObjectId function;
    ObjectId args;
    try {
      demand = new Demand(spec.getResources().getGpus(), spec.getResources().getCpus(),
          spec.getResources().getMemoryBytes());
      function = acceptFunction(session, spec.getFunction());
      args = acceptArguments(spec.getArgs());
    } catch (IllegalArgumentException | ObjectStoreException e) {
      reject(session, taskId, e.getMessage());
      return;
    }
    Task task = new Task(taskId, spec.getName(), session.identity(), demand, function, args,
        spec.getTimeoutSeconds(), session, System.nanoTime());
    task.allowRetries(spec.getRetries());
    tasks.add(task);
    // "Never" is answered at once, even when the scheduling pass below stops early.
    if (scheduler.decide(demand, feasibilitySlots()) instanceof Decision.Infeasible infeasible) {
      store().release(args);
      tasks.transition(task, TaskState.ERROR, TaskEvents.failed(taskId, FailureCode.INFEASIBLE,
          infeasible.reason(), timings(task, 0)));
      return;
    }
    schedule();
    // A call placed in this very pass is announced once, when it starts; one that waits is
    // announced as queued now.
    if (task.state() == TaskState.QUEUED) {
      tasks.announce(task, TaskEvents.queued(taskId));
    }
  }

  private void reject(ClientSession session, String taskId, String message) {
    session.send(TaskEvents.failed(taskId, FailureCode.INVALID_REQUEST, message,
        RuntimeTimings.getDefaultInstance()));
  }

  private ObjectId acceptFunction(ClientSession session, ObjectRef ref) {
    ObjectId id = ObjectId.parse(ref.getId());
    if (!ref.getInlineData().isEmpty()) {
      store().put(id, ref.getInlineData().asReadOnlyByteBuffer());
      if (!session.holdFunction(id)) {
        store().release(id); // the session holds one reference per function, not one per call
      }
      return id;
    }
    if (session.holdsFunction(id)) {
      return id;
    }
    if (claimUpload(id)) {
      session.holdFunction(id); // a function too large to inline came through PutObject
      return id;
    }
    throw new IllegalArgumentException("function object " + id + " is not on the cluster for"
        + " this session; send its bytes inline or upload them with PutObject first");
  }

  /** Takes over the reference PutObject made for an uploaded object. */
  boolean claimUpload(ObjectId id) {
    return takeOne(unclaimedUploads, id);
  }

  private ObjectId acceptArguments(ObjectRef ref) {
    ObjectId id = ObjectId.parse(ref.getId());
    if (!ref.getInlineData().isEmpty() || ref.getSize() == 0) {
      return store().put(id, ref.getInlineData().asReadOnlyByteBuffer());
    }
    if (claimUpload(id)) {
      return id;
    }
    if (!store().contains(id)) {
      throw new IllegalArgumentException("argument object " + id + " is not on the cluster;"
          + " upload it with PutObject or send it inline");
    }
    store().retain(id);
    return id;
  }

  void uploaded(ObjectId id) {
    unclaimedUploads.merge(id, 1, Integer::sum);
  }

  // ---- cancelling ------------------------------------------------------------------------

  /** @return false if the caller may not cancel it or it is unknown (already ended) */
  boolean cancel(ClientSession session, String taskId, String reason) {
    Task task = tasks.get(taskId).orElse(null);
    if (task == null || task.sink() != session) {
      return false;
    }
    stop(task, reason);
    return true;
  }

  private void stop(Task task, String reason) {
    switch (task.state()) {
      case QUEUED -> {
        store().release(task.args());
        tasks.transition(task, TaskState.CANCELLED, TaskEvents.cancelled(task.id(), "the call was "
            + reason + " while queued"));
      }
      case PLACED, RUNNING -> {
        AttachedWorker worker = placements.get(task.id());
        if (task.stopReason() == null && worker != null) {
          task.stopping(reason);
          worker.link().stop(task.id(), reason);
        }
      }
      default -> { }
    }
  }

  /** Ends a session: its unfinished calls are stopped and its functions released. Idempotent. */
  void sessionClosed(ClientSession session) {
    for (Task task : tasks.all()) {
      if (task.sink() == session) {
        stop(task, CLIENT_WENT_AWAY);
      }
    }
    session.close().forEach(store()::release);
  }

  // ---- placing and running ---------------------------------------------------------------

  /** Places every queued call that fits now, oldest first. */
  void schedule() {
    double now = System.currentTimeMillis() / 1000.0;
    // Draining workers stay candidates: a call with a short enough timeout may still go there.
    List<AttachedWorker> open = List.copyOf(workers.values());
    List<Map.Entry<Task, Decision.Placed>> chosen = new ArrayList<>();
    // Walk the live queue without changing it; slots are reserved as we go so later decisions
    // see them taken, and the queue itself changes only after the walk.
    for (Task task : tasks.queuedView()) {
      if (open.stream().noneMatch(worker -> worker.slots().freeCpus() > 0)) {
        // Every call needs CPU: nothing more can be placed until one ends. Stopping here keeps a
        // pass cheap when thousands of calls wait; status works out their reasons on demand.
        break;
      }
      List<WorkerSlots> candidates = candidatesFor(task, open, now);
      if (scheduler.decide(task.demand(), candidates) instanceof Decision.Placed placed) {
        workers.get(placed.workerId()).slots().reserve(task.demand(), placed.gpuIds());
        chosen.add(Map.entry(task, placed));
      }
    }
    chosen.forEach(placement -> dispatch(placement.getKey(), placement.getValue()));
  }

  /** The workers where the call can finish before their allocation ends. */
  List<WorkerSlots> candidatesFor(Task task, List<AttachedWorker> open, double now) {
    double mayRun = task.timeoutSeconds() > 0 ? task.timeoutSeconds() : drainMarginSeconds;
    List<WorkerSlots> candidates = new ArrayList<>(open.size());
    for (AttachedWorker worker : open) {
      if (worker.canFinish(now, mayRun)) {
        candidates.add(worker.slots());
      }
    }
    return candidates;
  }

  /** Starts a call on the slots already reserved for it. */
  private void dispatch(Task task, Decision.Placed placed) {
    AttachedWorker worker = workers.get(placed.workerId());
    placements.put(task.id(), worker);
    worker.callPlaced();
    task.placedOn(placed.workerId(), placed.gpuIds(), System.nanoTime());
    tasks.transitionQuietly(task, TaskState.PLACED);
    CallRequest request = new CallRequest(task.id(), task.function(), task.args(), placed.gpuIds());
    worker.link().run(request, new CallListener() {
      @Override
      public void started(String executorId) {
        context.runOnContext(ignored -> onStarted(task));
      }

      @Override
      public void output(boolean stderr, byte[] data) {
        context.runOnContext(ignored -> {
          if (task.state() == TaskState.RUNNING) {
            tasks.announce(task, TaskEvents.output(task.id(), stderr, data));
          }
        });
      }
    }).whenComplete((outcome, error) -> context.runOnContext(ignored -> onEnded(task,
        error == null ? outcome : new CallOutcome.ExecutorDied("worker agent failed: " + error))));
  }

  private void onStarted(Task task) {
    if (task.state() != TaskState.PLACED) {
      return;
    }
    task.startedAt(System.nanoTime());
    runningCount++;
    AttachedWorker worker = placements.get(task.id());
    tasks.transition(task, TaskState.RUNNING, TaskEvents.running(task.id(), task.workerId(),
        task.gpuIds(), worker != null && worker.slots().simulatedGpus()));
    if (task.timeoutSeconds() > 0) {
      long millis = Math.max(1, (long) (task.timeoutSeconds() * 1000));
      timeoutTimers.put(task.id(), context.owner().setTimer(millis, id -> stop(task,
          TIMEOUT_PREFIX + " of " + task.timeoutSeconds() + " s")));
    }
  }

  private void onEnded(Task task, CallOutcome outcome) {
    Long timer = timeoutTimers.remove(task.id());
    if (timer != null) {
      context.owner().cancelTimer(timer);
    }
    if (task.state() == TaskState.RUNNING) {
      runningCount--;
    }
    AttachedWorker worker = placements.remove(task.id());
    if (worker != null) {
      worker.slots().free(task.demand(), task.gpuIds());
      worker.callEnded();
    }
    boolean died = outcome instanceof CallOutcome.WorkerLost
        || outcome instanceof CallOutcome.ExecutorDied;
    if (died && task.stopReason() == null && task.retriesLeft() > 0) {
      // The call never finished anywhere: it runs again, with the arguments it still holds.
      task.requeued();
      tasks.transition(task, TaskState.QUEUED, TaskEvents.queued(task.id()));
    } else {
      store().release(task.args());
      finish(task, outcome);
    }
    schedule();
  }

  private void finish(Task task, CallOutcome outcome) {
    double runSeconds = outcome instanceof CallOutcome.Returned r ? r.runSeconds() : 0;
    RuntimeTimings timings = timings(task, runSeconds);
    if (outcome instanceof CallOutcome.Returned returned) {
      tasks.transition(task, returned.raised() ? TaskState.ERROR : TaskState.FINISHED,
          TaskEvents.result(task.id(), resultRef(returned), returned.raised(), timings));
    } else if (outcome instanceof CallOutcome.ExecutorDied died) {
      tasks.transition(task, TaskState.ERROR, TaskEvents.failed(task.id(),
          FailureCode.EXECUTOR_DIED, "the executor running " + task.name() + "() died: "
              + died.cause() + ". It has been replaced; the cluster keeps serving other calls.",
          timings));
    } else if (outcome instanceof CallOutcome.WorkerLost lost) {
      if (task.stopReason() != null) {
        tasks.transition(task, TaskState.CANCELLED, TaskEvents.cancelled(task.id(),
            "the call was " + task.stopReason() + " while its worker went away"));
        return;
      }
      tasks.transition(task, TaskState.ERROR, TaskEvents.failed(task.id(),
          FailureCode.WORKER_LOST, "the worker running " + task.name() + "() went away: "
              + lost.cause() + (task.requeues() > 0 ? " (after " + task.requeues()
              + " earlier attempt" + (task.requeues() == 1 ? "" : "s") + ")" : "")
              + ". Pass retries=N to run such calls again on another worker.", timings));
    } else if (outcome instanceof CallOutcome.Stopped stopped) {
      if (stopped.reason().startsWith(TIMEOUT_PREFIX)) {
        tasks.transition(task, TaskState.ERROR, TaskEvents.failed(task.id(),
            FailureCode.TIMED_OUT, task.name() + "() was " + stopped.reason()
                + "; pass a longer timeout= if it needs more", timings));
      } else {
        tasks.transition(task, TaskState.CANCELLED, TaskEvents.cancelled(task.id(),
            "the call was " + stopped.reason() + " while running; its executor was replaced"));
      }
    }
  }

  /** Small results travel inside the event; large ones wait in the store for GetObject. */
  private ObjectRef resultRef(CallOutcome.Returned returned) {
    ObjectRef.Builder ref = ObjectRef.newBuilder().setId(returned.result().hex())
        .setSize(returned.size());
    if (returned.size() <= inlineLimit) {
      ref.setInlineData(ByteString.copyFrom(store().readSmall(returned.result())));
      store().release(returned.result());
    } else {
      resultsAwaitingFetch.merge(returned.result(), 1, Integer::sum);
    }
    return ref.build();
  }

  /** @return whether the object was a result awaiting its fetch (now released) */
  boolean fetched(ObjectId id) {
    if (!takeOne(resultsAwaitingFetch, id)) {
      return false;
    }
    store().release(id);
    return true;
  }

  /** Counts one holder of {@code id} off {@code counts}; false if it had none. */
  private static boolean takeOne(Map<ObjectId, Integer> counts, ObjectId id) {
    Integer count = counts.get(id);
    if (count == null) {
      return false;
    }
    if (count == 1) {
      counts.remove(id);
    } else {
      counts.put(id, count - 1);
    }
    return true;
  }


  private static RuntimeTimings timings(Task task, double runSeconds) {
    long now = System.nanoTime();
    return RuntimeTimings.newBuilder().setQueueSeconds(task.queueSeconds(now))
        .setStartSeconds(task.startSeconds(now)).setRunSeconds(runSeconds).build();
  }
}
