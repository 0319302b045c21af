package dev.bulletin.runtime.control;

import dev.bulletin.runtime.objects.ObjectDirectory;
import dev.bulletin.runtime.objects.ResidentDirectory;
import dev.bulletin.runtime.workers.AttachedWorker;
import dev.bulletin.runtime.workers.ResidentGpus;
import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStoreException;
import dev.bulletin.runtime.scheduler.ClusterCapacity;
import dev.bulletin.runtime.scheduler.ClusterScheduler;
import dev.bulletin.runtime.scheduler.Demand;
import dev.bulletin.runtime.scheduler.Feasibility;
import dev.bulletin.runtime.scheduler.plan.Plan;
import dev.bulletin.runtime.scheduler.policy.PolicyConfig;
import dev.bulletin.runtime.scheduler.policy.QosClass;
import dev.bulletin.runtime.scheduler.snapshot.QueuedCall;
import dev.bulletin.runtime.scheduler.snapshot.RunningCall;
import dev.bulletin.runtime.scheduler.snapshot.Snapshot;
import dev.bulletin.runtime.scheduler.snapshot.WorkerState;
import dev.bulletin.runtime.task.Task;
import dev.bulletin.runtime.task.TaskState;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * One scheduling pass as the runtime sees it: the cluster's state turned into the policy
 * scheduler's {@link Snapshot}, and its {@link Plan} back. The control plane applies the plan.
 */
public final class PolicyPass {

  private final ClusterScheduler scheduler;
  private final PolicyConfig policy;
  private final UsageLedger ledger;
  private final Clock clock;
  private final Duration assumedRun;
  private final WorkerStates workerStates = new WorkerStates();

  /**
   * @param assumedRun how long a call without a timeout is taken to run when matching it to a
   *     worker whose allocation ends (the runtime's drain margin): its enforced limit is its QoS
   *     class's walltime, but holding every such call off shorter allocations would leave them
   *     idle
   * @param seed the scheduler's randomness (how ties between equal workers break): the same
   *     seed replays the same placements for the same cluster and queue
   */
  public PolicyPass(PolicyConfig policy, Clock clock, Duration assumedRun, long seed) {
    this.policy = policy;
    this.clock = clock;
    this.assumedRun = assumedRun;
    this.scheduler = ClusterScheduler.create(clock, seed);
    this.ledger = new UsageLedger(policy);
  }

  PolicyConfig policy() {
    return policy;
  }

  UsageLedger ledger() {
    return ledger;
  }

  Instant now() {
    return clock.instant();
  }

  /** Could a call that asks for {@code demand} ever run on {@code cluster}? The scheduler says. */
  Feasibility feasible(Demand demand, ClusterCapacity cluster) {
    return scheduler.feasible(demand, cluster);
  }

  /**
   * Whether a pass considers this call wherever it waits in its user's queue: it spends
   * credits, or asks for a QoS class above the default.
   */
  boolean goesAhead(Task task) {
    return task.credits() > 0 || priorityOf(task.qos()) > priorityOf("");
  }

  private int priorityOf(String qos) {
    return policy.qosFor(qos).map(QosClass::priority).orElse(0);
  }

  private Duration expectedRun(Task task) {
    if (task.timeoutSeconds() > 0 || task.walltime().compareTo(assumedRun) < 0) {
      return task.walltime();
    }
    return assumedRun;
  }

  /**
   * @param objects where objects live: each worker's held objects and each call's input sizes
   *     feed the locality score
   * @param explain whether the plan explains the calls that wait (Snapshot#explainWaiting)
   */
  Plan plan(Collection<AttachedWorker> workers, Collection<Task> placedOrRunning,
      Collection<Task> queue, ObjectDirectory objects, boolean explain) {
    Instant now = clock.instant();
    List<WorkerState> workerStates = this.workerStates.of(workers, objects);
    List<RunningCall> running = new ArrayList<>(placedOrRunning.size());
    for (Task task : placedOrRunning) {
      if (task.workerId() != null) {
        running.add(runningCall(task, now));
      }
    }
    List<QueuedCall> queued = new ArrayList<>(queue.size());
    for (Task task : queue) {
      queued.add(queuedCall(task, objects, workers));
    }
    return scheduler.plan(new Snapshot(workerStates, running, queued, ledger.snapshot(now),
        policy, explain));
  }

  /**
   * The task as the scheduler sees it running, kept on the task until it changes. A call placed
   * but not started yet counts from the first pass that sees it placed.
   */
  private RunningCall runningCall(Task task, Instant now) {
    RunningCall kept = task.runningView();
    if (kept != null) {
      return kept;
    }
    Instant started = task.state() == TaskState.RUNNING ? task.startedAt() : now;
    RunningCall call = RunningCall.builder().id(task.id()).user(task.owner().user())
        .group(task.owner().group()).qos(task.qos()).on(task.workerId(), task.gpuIds())
        .gpuEighths(task.demand().gpuEighths()).cpus(task.demand().cpus())
        .memoryBytes(task.demand().memoryBytes()).preemptible(task.preemptible())
        .startedAt(started).walltime(expectedRun(task)).preemptedFor(task.preemptedFor())
        .build();
    task.runningView(call);
    return call;
  }

  /**
   * The task as the scheduler sees it queued. Kept on the task once nothing in it can change
   * between passes: its inputs' sizes known, and no resident values that could move.
   */
  private QueuedCall queuedCall(Task task, ObjectDirectory objects,
      Collection<AttachedWorker> workers) {
    QueuedCall kept = task.queuedView();
    if (kept != null) {
      return kept;
    }
    String liveOn = liveOn(task, objects.residents(), workers);
    // The runtime's directory knows better than the handle where a value moved since.
    String preferred = liveOn.isEmpty() && !task.residentHandles().isEmpty()
        ? objects.residents().preferredFor(task.args().namespace(), task.residentHandles(),
            task.residentMadeOn())
        : liveOn;
    QueuedCall call = QueuedCall.builder().id(task.id()).user(task.owner().user())
        .group(task.owner().group()).qos(task.qos()).demand(task.demand())
        .priority(task.priority()).creditsSpent((long) task.credits())
        .inputs(inputs(task, objects)).submittedAt(task.submittedAt())
        .walltime(expectedRun(task))
        .preferredWorker(preferred)
        .keptLive(!liveOn.isEmpty())
        .residentSession(task.sink().sessionId().isEmpty() ? ""
            : ResidentGpus.key(task.args().namespace(), task.sink().sessionId()))
        .build();
    if (task.residentHandles().isEmpty() && task.inputSizes() != null) {
      task.queuedView(call);
    }
    return call;
  }

  /**
   * The worker where values the call reads are live now (on a GPU, not spilled), or "": where
   * they were restored since their last spill, or, never spilled, the worker the client's
   * handle names if a GPU there keeps values of the caller's. Asked at each pass: a spill
   * reported since the submit frees the call to go anywhere. A handle of another user's, or a
   * made-up one, holds the call nowhere.
   */
  private static String liveOn(Task task, ResidentDirectory residents,
      Collection<AttachedWorker> workers) {
    if (task.residentHandles().isEmpty()) {
      return "";
    }
    String namespace = task.args().namespace();
    String restored = residents.restoredLiveOn(namespace, task.residentHandles());
    if (!restored.isEmpty() || task.residentMadeOn().isEmpty()
        || !residents.neverSpilled(namespace, task.residentHandles())) {
      return restored;
    }
    for (AttachedWorker worker : workers) {
      if (worker.id().equals(task.residentMadeOn())) {
        return worker.residentGpus().keepsFor(namespace) ? worker.id() : "";
      }
    }
    return "";
  }

  /** The call's argument objects, id to size: what the locality score weighs. */
  private static Map<String, Long> inputs(Task task, ObjectDirectory objects) {
    if (task.inputSizes() != null) {
      return task.inputSizes();
    }
    Map<String, Long> inputs = new HashMap<>();
    for (ObjectKey key : task.refs()) {
      inputs.put(key.id().hex(), sizeOrZero(key, objects));
    }
    inputs.put(task.args().id().hex(), sizeOrZero(task.args(), objects));
    if (!inputs.containsValue(0L)) {
      task.knownInputSizes(inputs);
    }
    return inputs;
  }

  private static long sizeOrZero(ObjectKey key, ObjectDirectory objects) {
    try {
      return objects.size(key);
    } catch (ObjectStoreException gone) {
      return 0; // a lost input: the call fails when it is placed, the score does not matter
    }
  }
}
