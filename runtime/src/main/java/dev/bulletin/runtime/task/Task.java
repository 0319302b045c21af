package dev.bulletin.runtime.task;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.runtime.identity.Identity;
import dev.bulletin.runtime.scheduler.Demand;
import dev.bulletin.runtime.scheduler.plan.WaitInfo;
import dev.bulletin.runtime.scheduler.snapshot.QueuedCall;
import dev.bulletin.runtime.scheduler.snapshot.RunningCall;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;

/**
 * One call, as the control plane tracks it. Mutable, owned by the control plane's event loop;
 * its state changes only through {@link TaskTable#transition}.
 */
public final class Task {
  private final String id;
  private final String name;
  private final Identity owner;
  private final Demand demand;
  private final ObjectKey function;
  private final ObjectKey args;
  private final List<ObjectKey> refs;
  private Map<String, Long> inputSizes;
  private List<String> residentHandles = List.of();
  private String residentMadeOn = "";
  private Map<String, ObjectKey> restoring = Map.of();
  private Map<String, String> residentLost = Map.of();
  private final double timeoutSeconds;
  private final TaskEventSink sink;
  private final long submittedNanos;

  TaskState state = TaskState.QUEUED;
  private String workerId;
  private List<Integer> gpuIds = List.of();
  private long placedNanos;
  private boolean fitted = true;
  private long startedNanos;
  private StopReason stopReason;
  private int retriesLeft;
  private int requeues;
  private int attempts;
  private Instant submittedAt = Instant.now();
  private Instant startedAt;
  private String qos = "";
  private int priority;
  private double credits;
  private Duration walltime = Duration.ZERO;
  private boolean preemptible;
  private String preemptedFor;
  private int preemptions;
  private WaitInfo waitInfo;
  private long waitToldNanos;
  private final CallUsage usage = new CallUsage();
  /**
   * How the scheduler sees it, kept from one pass to the next (see {@link #runningView}); every
   * change to what they show drops them.
   */
  private RunningCall runningView;
  private QueuedCall queuedView;
  private dev.bulletin.worker.ExecutorSpec executorSpec = dev.bulletin.worker.ExecutorSpec.NONE;

  public Task(String id, String name, Identity owner, Demand demand, ObjectKey function,
      ObjectKey args, List<ObjectKey> refs, double timeoutSeconds, TaskEventSink sink,
      long submittedNanos) {
    this.id = id;
    this.name = name;
    this.owner = owner;
    this.demand = demand;
    this.function = function;
    this.args = args;
    this.refs = List.copyOf(refs);
    this.timeoutSeconds = timeoutSeconds;
    this.sink = sink;
    this.submittedNanos = submittedNanos;
  }

  public String id() { return id; }
  public String name() { return name; }
  public Identity owner() { return owner; }
  public Demand demand() { return demand; }
  public ObjectKey function() { return function; }
  public ObjectKey args() { return args; }
  /** Objects the arguments refer to; the task holds one reference on each until it ends. */
  public List<ObjectKey> refs() { return refs; }
  public double timeoutSeconds() { return timeoutSeconds; }
  public TaskEventSink sink() { return sink; }
  /** What it used so far, for the usage ledger. */
  public CallUsage usage() { return usage; }
  public TaskState state() { return state; }
  public String workerId() { return workerId; }
  public List<Integer> gpuIds() { return gpuIds; }
  /** Why the control plane is stopping it, or null while it is not. */
  public StopReason stopReason() { return stopReason; }

  public void placedOn(String workerId, List<Integer> gpuIds, long nanos) {
    this.workerId = workerId;
    this.gpuIds = List.copyOf(gpuIds);
    this.placedNanos = nanos;
    dropViews();
  }

  /** It started running: a new attempt. */
  public void startedAt(long nanos) {
    this.startedNanos = nanos;
    this.startedAt = Instant.now();
    attempts++;
    dropViews();
  }

  /**
   * A run that started before the runtime restarted, adopted from the worker that still runs it
   * (docs/durability.md): running again from now on, with no new attempt.
   */
  public void adoptedRunning(long nanos) {
    this.startedNanos = nanos;
    this.startedAt = Instant.now();
    dropViews();
  }

  /** Runs started so far (the current one included): 1 on its first run. */
  public int attempts() { return attempts; }

  /**
   * A call restored from the journal: when it was first submitted, and how many times it ran
   * before the runtime restarted.
   */
  public void restored(Instant submittedAt, int attempts) {
    this.submittedAt = submittedAt;
    this.attempts = attempts;
    dropViews();
  }

  /** Records why the call is being stopped (cancel, timeout), before its executor is killed. */
  public void stopping(StopReason reason) {
    this.stopReason = reason;
  }

  /** When it was submitted; kept when it is requeued, so it keeps its place. */
  public Instant submittedAt() { return submittedAt; }
  /** When it started running (wall clock), or null before. */
  public Instant startedAt() { return startedAt; }
  public String qos() { return qos; }
  public int priority() { return priority; }
  /** Credits its group offers to move it up the queue. */
  public double credits() { return credits; }
  /** How long it may run: its timeout, else its QoS class's maximum. */
  public Duration walltime() { return walltime; }
  /** Whether the placement it runs under may be preempted. */
  public boolean preemptible() { return preemptible; }
  /** The call it is being preempted for, or null. */
  public String preemptedFor() { return preemptedFor; }
  /** How many times it was preempted and requeued. */
  public int preemptions() { return preemptions; }

  public void scheduling(String qos, int priority, double credits, Duration walltime) {
    this.qos = qos;
    this.priority = priority;
    this.credits = credits;
    this.walltime = walltime;
    dropViews();
  }

  public void placedPreemptible(boolean preemptible) {
    this.preemptible = preemptible;
    dropViews();
  }

  public void preempting(String forCallId) {
    this.preemptedFor = forCallId;
    dropViews();
  }

  /**
   * Its argument objects' sizes, id to bytes, once all are known (a Future's result may not be
   * yet): the scheduler's locality input, computed once instead of every pass. Null until then.
   */
  public Map<String, Long> inputSizes() { return inputSizes; }

  /**
   * The ids of the resident values (bulletin.Resident) its arguments name, in its owner's
   * namespace. Not journaled, as {@link #preferredWorker}.
   */
  public List<String> residentHandles() { return residentHandles; }

  public void readsResident(List<String> handles, String madeOn) {
    this.residentHandles = List.copyOf(handles);
    this.residentMadeOn = madeOn == null ? "" : madeOn;
    dropViews();
  }

  /**
   * The worker the client's handles say made the values (TaskSpec.prefer_worker), or "". Where
   * they are now is the runtime's directory's to say ({@code ResidentDirectory#preferredFor}),
   * asked when the call is scheduled and placed. Not journaled, as {@link #residentHandles}.
   */
  public String residentMadeOn() { return residentMadeOn; }

  /**
   * For the attempt placed now: handle id to the spill object another worker made, which the
   * call restores (held for the call while it is placed); empty between attempts.
   */
  public Map<String, ObjectKey> restoring() { return restoring; }

  /** For the attempt placed now: why resident values it names are gone, as the runtime knows. */
  public Map<String, String> residentLost() { return residentLost; }

  public void restoring(Map<String, ObjectKey> spills, Map<String, String> lost) {
    this.restoring = Map.copyOf(spills);
    this.residentLost = Map.copyOf(lost);
  }

  public void knownInputSizes(Map<String, Long> sizes) {
    this.inputSizes = Map.copyOf(sizes);
    dropViews();
  }

  /**
   * The scheduler's view of it placed or running, as the last pass built it, or null: a pass
   * reads every running call, and building 8,000 of them anew each pass was a twentieth of the
   * event loop at 1,000 workers (make bench-scale, JFR).
   */
  public RunningCall runningView() { return runningView; }
  public void runningView(RunningCall view) { this.runningView = view; }
  /** The scheduler's view of it queued, kept only where it does not change between passes. */
  public QueuedCall queuedView() { return queuedView; }
  public void queuedView(QueuedCall view) { this.queuedView = view; }

  private void dropViews() {
    runningView = null;
    queuedView = null;
  }

  /** Why it waits, as last told to its caller, or null (not told yet, or it ran since). */
  public WaitInfo waitInfo() { return waitInfo; }

  /** When {@link #waitInfo} was told (System.nanoTime). */
  public long waitToldNanos() { return waitToldNanos; }

  /** What the call needs of its executor: memory limit, Python environment. */
  public dev.bulletin.worker.ExecutorSpec executorSpec() { return executorSpec; }

  public void needsExecutor(dev.bulletin.worker.ExecutorSpec spec) { this.executorSpec = spec; }

  public void toldWaiting(WaitInfo info, long nanos) {
    this.waitInfo = info;
    this.waitToldNanos = nanos;
  }

  /** How many more times the call may run again after losing its worker. */
  public int retriesLeft() { return retriesLeft; }
  /** How many times the call went back to the queue (worker lost, preempted). */
  public int requeues() { return requeues; }

  public void allowRetries(int retries) {
    this.retriesLeft = Math.max(0, retries);
  }

  /** Forgets the placement of a run that ended without a result; uses up one retry. */
  public void requeued() {
    if (preemptedFor != null) {
      preemptions++; // preemption is the cluster's choice: it costs no retry
    } else {
      retriesLeft = Math.max(0, retriesLeft - 1);
    }
    requeues++;
    forgetPlacement();
  }

  /** Forgets the placement of a call that never reached its worker: it ran nowhere. */
  public void undelivered() {
    forgetPlacement();
  }

  private void forgetPlacement() {
    preemptedFor = null;
    preemptible = false;
    waitInfo = null;
    workerId = null;
    gpuIds = List.of();
    placedNanos = 0;
    startedNanos = 0;
    stopReason = null;
    dropViews();
  }

  public double queueSeconds(long now) {
    return seconds(submittedNanos, placedNanos == 0 ? now : placedNanos);
  }

  public double startSeconds(long now) {
    if (placedNanos == 0) {
      return 0;
    }
    return seconds(placedNanos, startedNanos == 0 ? now : startedNanos);
  }

  /**
   * Accepted though no worker could run it: submitted while the workers of a restarted
   * runtime were still reattaching. It fails if none that can run it has come when they may
   * no longer come ({@code Passes#refuse}).
   */
  public void acceptedUnfit() { fitted = false; }

  /** A worker that can run it is (or was) in the cluster. */
  public void fits() { fitted = true; }

  public boolean fitted() { return fitted; }

  /** From placement to {@code now}: how long its slots have been reserved for it. */
  public double heldSeconds(long now) {
    return placedNanos == 0 ? 0 : seconds(placedNanos, now);
  }

  private static double seconds(long from, long to) {
    return Math.max(0, to - from) / 1e9;
  }
}
