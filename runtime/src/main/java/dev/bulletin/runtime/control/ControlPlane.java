package dev.bulletin.runtime.control;

import dev.bulletin.runtime.api.ClientSession;
import dev.bulletin.runtime.api.TaskEvents;
import dev.bulletin.runtime.objects.ObjectDirectory;
import dev.bulletin.runtime.objects.TaskObjects;
import dev.bulletin.runtime.workers.AttachedWorker;
import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.protocol.FailureCode;
import dev.bulletin.protocol.TaskSpec;
import dev.bulletin.runtime.scheduler.Demand;
import dev.bulletin.runtime.scheduler.Feasibility;
import dev.bulletin.runtime.scheduler.WorkerCapacity;
import dev.bulletin.runtime.scheduler.WorkerSlots;
import dev.bulletin.runtime.scheduler.plan.Placement;
import dev.bulletin.runtime.task.StopReason;
import dev.bulletin.runtime.task.Task;
import dev.bulletin.runtime.task.TaskState;
import dev.bulletin.runtime.task.TaskTable;
import dev.bulletin.worker.CallOutcome;
import io.vertx.core.Context;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * The runtime's state and the rules that change it: accepting calls, placing them through the
 * scheduler on the attached workers and stopping them; {@link CallRunner} hands placed calls over
 * and turns their outcomes into events. Every method runs on one Vert.x event loop
 * ({@code context}); worker callbacks hop back onto it.
 */
public final class ControlPlane {

  private final ObjectStore store;
  /** The policy scheduler: QoS, quotas, fair share, topology, preemption, wait reasons. */
  private final PolicyPass policy;
  private final Passes passes;
  private final double drainMarginSeconds;
  private final TaskTable tasks;
  /** Attached workers in the order they joined (first fit prefers the earliest). */
  private final Map<String, AttachedWorker> workers = new LinkedHashMap<>();
  /** {@link #workers()}' copy until a worker attaches or leaves: every pass reads it. */
  private List<AttachedWorker> workerList;
  /** What feasibility compares against, pools' potential workers included (a call only they
   *  fit waits for one). */
  private final ClusterShapes shapes = new ClusterShapes(workers);
  /** Where objects live (results kept on remote workers), and the references to them. */
  private final ObjectDirectory objects;
  private java.util.function.BiConsumer<String, Double> creditsEarned = (group, credits) -> { };
  /** The journal's hook points (docs/durability.md): records go out before acknowledgements. */
  private final Journaling journaling;
  /** Restored calls that wait for the remote worker that ran them to reattach. */
  private final RestoredRemoteWork restoredRemoteWork;
  private final Admission admission;
  /** Where placed calls run and how they end: placements, walltimes, outcomes. */
  private final CallRunner runner;
  private PoolOutlook poolOutlook = PoolOutlook.NONE;

  /**
   * @param drainMarginSeconds a worker whose allocation ends sooner than this takes no call
   *     without a timeout (a call with one goes there only if it can finish in time)
   */
  public ControlPlane(Context context, ObjectStore store, PolicyPass policy, long inlineLimit,
      double drainMarginSeconds, Map<String, String> runAs, Journaling journaling) {
    this.journaling = journaling;
    this.store = store;
    this.policy = policy;
    this.tasks = new TaskTable(policy::goesAhead);
    this.passes = new Passes(this, policy, context);
    this.objects = new ObjectDirectory(store,
        id -> Optional.ofNullable(workers.get(id)).map(AttachedWorker::link));
    this.drainMarginSeconds = drainMarginSeconds;
    tasks.listen(journaling);
    this.restoredRemoteWork = new RestoredRemoteWork(this, context);
    this.admission = new Admission(tasks, journaling, policy, objects);
    this.runner = new CallRunner(context, journaling, tasks, objects, policy,
        new CallEndings(tasks, objects, journaling, store, inlineLimit), runAs,
        workers::get, this::stop, passes::requestSoon);
    policy.ledger().onChange(() -> journaling.ledger(policy.ledger().image()));
    objects.residents().listen(journaling.residents());
  }

  public Journaling journaling() {
    return journaling;
  }

  /** Restored calls waiting for their remote worker to reattach (docs/durability.md). */
  public RestoredRemoteWork restoredRemoteWork() {
    return restoredRemoteWork;
  }

  PolicyPass policy() {
    return policy;
  }

  /** The runtime's object store: every call's function and arguments are in it. */
  public ObjectStore store() {
    return store;
  }

  /** References to objects and where they live: every retain and release goes through it. */
  public ObjectDirectory objects() {
    return objects;
  }

  public TaskTable tasks() {
    return tasks;
  }

  public Collection<AttachedWorker> workers() {
    if (workerList == null) {
      workerList = List.copyOf(workers.values());
    }
    return workerList;
  }

  public double drainMarginSeconds() {
    return drainMarginSeconds;
  }

  /** The scheduling policy: QoS classes, groups and their quotas (the dashboard shows them). */
  public dev.bulletin.runtime.scheduler.policy.PolicyConfig policyConfig() {
    return policy.policy();
  }

  /** What groups and users have used now, as the usage ledger keeps it. */
  public dev.bulletin.runtime.scheduler.snapshot.Usage usage() {
    return policy.ledger().snapshot(policy.now());
  }

  /** Tells {@code nanos} how long each run of scheduling passes took (the runtime's metrics). */
  public void observePasses(java.util.function.LongConsumer nanos) {
    passes.observe(nanos);
  }

  /** Every worker's slots, draining ones too: what could run a call at all. */
  public List<WorkerSlots> allSlots() {
    return workers.values().stream().map(AttachedWorker::slots).toList();
  }

  /**
   * Workers that pools could start (one idle worker per pool shape): a call only they could run
   * waits for one instead of failing as infeasible.
   */
  public void potentialWorkers(List<WorkerCapacity> shapes) {
    this.shapes.potential(shapes);
  }

  /** Where waiting calls learn what the pools do for them (a worker starting, or why none). */
  public void poolOutlook(PoolOutlook outlook) {
    poolOutlook = outlook;
  }

  PoolOutlook poolOutlook() {
    return poolOutlook;
  }

  /** What the pools do changed: waiting calls are told again (a pass over the full window). */
  public void poolsChanged() {
    passes.requestFull();
  }

  /**
   * Could the call ever run here: on an attached worker (draining ones too) or one a pool could
   * start? The scheduler's answer, with what the cluster has when it is "never".
   */
  public Feasibility feasibility(Demand demand) {
    return policy.feasible(demand, shapes.all());
  }

  /** Could the call ever run on a worker that takes calls now (attached, not draining)? */
  Feasibility feasibilityOnOpenWorkers(Demand demand) {
    return policy.feasible(demand, shapes.open());
  }

  public Optional<AttachedWorker> worker(String workerId) {
    return Optional.ofNullable(workers.get(workerId));
  }

  // ---- workers ---------------------------------------------------------------------------

  /** @return false if a worker with this id is already attached */
  public boolean attach(AttachedWorker worker) {
    workerList = null;
    if (workers.putIfAbsent(worker.id(), worker) != null) {
      return false;
    }
    shapes.workersChanged();
    schedule();
    return true;
  }

  /** Stops using a worker its pool is stopping: its calls end as lost (requeued with retries). */
  public void forget(String workerId, String cause) {
    AttachedWorker worker = workers.get(workerId);
    if (worker != null) {
      worker.link().detach(cause);
      detach(worker, "went away (" + cause + ")");
    }
  }

  public boolean isAttached(String workerId) {
    return workers.containsKey(workerId);
  }

  /**
   * Forgets a worker that went away. Its link has already ended the calls it ran (as
   * {@link CallOutcome.WorkerLost}); they are requeued or failed as those outcomes arrive. The
   * results only it kept are lost.
   *
   * @param how what happened to it, read after "worker W, which": "lost its connection: ..."
   */
  public void detach(AttachedWorker worker, String how) {
    workerList = null;
    if (workers.remove(worker.id(), worker)) {
      shapes.workersChanged();
      objects.workerLost(worker.id(), how);
    }
    schedule();
  }

  public int runningCount() {
    return runner.runningCount();
  }

  // ---- accepting calls -------------------------------------------------------------------

  /**
   * Accepts a Submit's calls, then asks for one scheduling pass for them all: a pass per call
   * placed each call of a batch on its own while the queue stayed short (make bench-scale,
   * 1,000 simulated workers, QoS batch: 50,000 passes for 50,000 calls, each over every worker).
   * A lone call still gets its pass at once.
   */
  public void submit(ClientSession session, List<TaskSpec> specs) {
    specs.forEach(spec -> accept(session, spec));
    schedule();
  }

  private void accept(ClientSession session, TaskSpec spec) {
    Task task = admission.admit(session, spec);
    if (task == null) {
      return;
    }
    String taskId = task.id();
    Demand demand = task.demand();
    tasks.add(task);
    journaling.accepted(task, session, spec.getRetries());
    session.callAccepted(taskId);
    // "Never" is answered at once, even when the scheduling pass stops early; but not while a
    // restarted runtime's workers may still be reattaching. A call placed by the pass is
    // announced once, when it starts; one that waits is announced with why it waits.
    if (feasibility(demand) instanceof Feasibility.Infeasible infeasible) {
      if (!restoredRemoteWork.workersMayReattach()) {
        TaskObjects.release(objects, task);
        tasks.transition(task, TaskState.ERROR, TaskEvents.failed(taskId,
            FailureCode.INFEASIBLE, infeasible.reason(), CallEndings.timings(task, 0)));
        return;
      }
      task.acceptedUnfit();
    }
  }

  /** A remote worker uploaded an object the runtime pulled from it (see ObjectDirectory). */
  public void uploaded(ObjectKey key) {
    objects.arrived(key);
  }

  // ---- cancelling ------------------------------------------------------------------------

  /**
   * Cancels a call on its caller's request.
   *
   * @return false if the caller may not cancel it or it is unknown (already ended)
   */
  public boolean cancel(ClientSession session, String taskId) {
    Task task = tasks.get(taskId).orElse(null);
    if (task == null || task.sink() != session) {
      return false;
    }
    stop(task, StopReason.BY_CALLER);
    return true;
  }

  private void stop(Task task, StopReason reason) {
    switch (task.state()) {
      case QUEUED -> {
        TaskObjects.release(objects, task);
        tasks.transition(task, TaskState.CANCELLED, TaskEvents.cancelled(task.id(), "the call was "
            + reason.describe() + " while queued"));
      }
      case PLACED, RUNNING -> {
        AttachedWorker worker = runner.placementOf(task.id()).orElse(null);
        if (worker == null && restoredRemoteWork.cancel(task, reason)) {
          return; // restored, its worker not back yet: it ends here, stopped there on reattach
        }
        if (task.stopReason() == null && worker != null) {
          task.stopping(reason);
          worker.link().stop(task.id(), reason.describe());
        }
      }
      default -> { }
    }
  }

  /** Ends a session: its unfinished calls are stopped and its functions released. Idempotent. */
  public void sessionClosed(ClientSession session) {
    for (Task task : tasks.all()) {
      if (task.sink() == session) {
        stop(task, StopReason.CLIENT_GONE);
      }
    }
    session.close().forEach(objects::release);
    session.holds().releaseAll();
    journaling.sessionClosed(session);
    releaseResident(session, true);
  }

  /**
   * Drops the resident values (issue 29) the session kept, on every attached worker: any may
   * hold some of its user's; {@code ended}: the session ended (else it released them and goes
   * on). The user is the session's own namespace, so a session can only ever drop its own
   * user's values. A remote worker whose link is broken hears it when it reattaches; one that
   * has not reattached since a restart of the runtime does not. Only the workers the session's
   * calls were sent to are told, where that is known: 2,000 sessions ending on 1,000 workers
   * were two million messages (make bench-scale).
   */
  public void releaseResident(ClientSession session, boolean ended) {
    objects.residents().sessionEnded(session.namespace(), session.id(), ended
        ? "the client session that kept it ended" : "its session released it");
    Collection<AttachedWorker> told = session.workersUsed()
        .map(used -> used.stream().map(workers::get).filter(java.util.Objects::nonNull).toList())
        .orElseGet(() -> List.copyOf(workers.values()));
    for (AttachedWorker worker : told) {
      worker.residentGpus().sessionEnded(session.namespace(), session.id());
      worker.link().dropResident(session.namespace(), session.id(), ended);
    }
  }

  /**
   * Calls accepted in a Submit whose records could not be journaled: they are stopped, as their
   * caller is told the Submit failed (the runtime refuses what it cannot keep).
   */
  public void unjournaled(ClientSession session, List<String> taskIds, String why) {
    for (String taskId : taskIds) {
      Task task = tasks.get(taskId).orElse(null);
      if (task != null && task.sink() == session) {
        stop(task, new StopReason.Cancelled("refused, as the runtime could not journal it: " + why));
      }
    }
  }

  // ---- placing and running ---------------------------------------------------------------

  /** Asks for a scheduling pass (see {@link Passes}). */
  void schedule() {
    passes.request();
  }

  /** A worker that took no calls (its executors were starting) takes them now: a pass places. */
  public void workerOpened() {
    schedule();
  }

  /** Told the credits each group earned, as it earns them (the usage ledger records them). */
  public void onCreditsEarned(java.util.function.BiConsumer<String, Double> listener) {
    this.creditsEarned = listener;
  }

  void creditsEarned(String group, double credits) {
    creditsEarned.accept(group, credits);
  }

  /** Time passing: credits are earned and a pass runs (see {@link Passes#tick}). */
  public void tick(java.time.Duration elapsed) {
    passes.tick(elapsed);
  }

  java.util.Set<String> placedTaskIds() {
    return runner.placedTaskIds();
  }

  /** The tasks placed or running (see {@link CallRunner#placedTasks}). */
  List<Task> placedTasks() {
    return runner.placedTasks();
  }

  Optional<AttachedWorker> placementOf(String taskId) {
    return runner.placementOf(taskId);
  }

  /** Fails a queued call that can never run as asked. */
  void failInfeasible(Task task, String reason) {
    TaskObjects.release(objects, task);
    tasks.transition(task, TaskState.ERROR, TaskEvents.failed(task.id(), FailureCode.INFEASIBLE,
        reason, CallEndings.timings(task, 0)));
  }

  /** Reserves the placement's slots and starts the call: see {@link CallRunner#dispatch}. */
  void dispatch(Task task, Placement placed) {
    runner.dispatch(task, placed);
  }

  /** Takes over a restored call its remote worker still runs: see {@link CallRunner#adopt}. */
  void adopt(Task task, AttachedWorker worker, List<Integer> gpuIds) {
    runner.adopt(task, worker, gpuIds);
  }
}
