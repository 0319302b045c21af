package dev.bulletin.runtime.workers;

import dev.bulletin.runtime.scheduler.Demand;
import dev.bulletin.runtime.scheduler.WorkerSlots;
import dev.bulletin.runtime.scheduler.snapshot.GpuTopology;
import java.time.Instant;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * A worker the control plane may place calls on: who it is, its slots and the link that runs
 * calls on it. It owns its slots' reservations: {@link #reserve} and {@link #release}, by call,
 * are the only way the runtime takes and gives back a worker's slots, so a call's slots go back
 * once, and only what it took. Owned by the control plane's event loop.
 */
public final class AttachedWorker {
  private final String id;
  private final String host;
  private final String pool;
  private final List<String> gpuNames;
  private final boolean remote;
  private final double expiresAtEpochSeconds;
  private final String providerHandle;
  private final WorkerSlots slots;
  private final WorkerLink link;
  private final GpuTopology topology;
  /** What each placed or running call holds here, by call id. */
  private final Map<String, Reservation> reservations = new HashMap<>();
  private final ResidentGpus residentGpus = new ResidentGpus();
  private Instant idleSince = Instant.now();
  private String drainReason;
  private long drains;

  public AttachedWorker(String id, String host, String pool, List<String> gpuNames, boolean remote,
      double expiresAtEpochSeconds, String providerHandle, WorkerSlots slots, WorkerLink link,
      String topology) {
    this.topology = topologyOf(topology, slots.gpus());
    this.id = id;
    this.host = host;
    this.pool = pool;
    this.gpuNames = List.copyOf(gpuNames);
    this.remote = remote;
    this.expiresAtEpochSeconds = expiresAtEpochSeconds;
    this.providerHandle = providerHandle;
    this.slots = slots;
    this.link = link;
  }

  /** Reported as {@code nvidia-smi topo -m}; a worker that reports none (or one that does not
   * match its GPUs) counts as every pair joined through the host. */
  private static GpuTopology topologyOf(String reported, int gpus) {
    if (reported != null && !reported.isBlank()) {
      try {
        GpuTopology parsed = GpuTopology.parseNvidiaSmi(reported);
        if (parsed.gpus() == gpus) {
          return parsed;
        }
      } catch (IllegalArgumentException unreadable) {
        // Fall through: placement still works, only without topology.
      }
    }
    return GpuTopology.uniform(gpus, GpuTopology.Link.HOST);
  }

  public GpuTopology topology() { return topology; }
  public String id() { return id; }
  public String host() { return host; }
  public String pool() { return pool; }
  public List<String> gpuNames() { return gpuNames; }
  public boolean remote() { return remote; }
  public double expiresAt() { return expiresAtEpochSeconds; }
  public String providerHandle() { return providerHandle; }
  public WorkerSlots slots() { return slots; }

  /** Its GPUs that keep a session's resident values between calls (issue 29). */
  public ResidentGpus residentGpus() { return residentGpus; }
  public WorkerLink link() { return link; }

  /** Calls placed or running here. */
  int runningCalls() { return reservations.size(); }
  /** When its last call ended, or when it attached; meaningful while it runs nothing. */
  Instant idleSince() { return idleSince; }

  private record Reservation(Demand demand, List<Integer> gpuIds) {}

  /**
   * Takes the call's slots here: the named GPUs, its CPUs and its memory.
   *
   * @throws IllegalStateException if the call holds slots here already, or they are not free
   */
  public void reserve(String callId, Demand demand, List<Integer> gpuIds) {
    if (reservations.containsKey(callId)) {
      throw new IllegalStateException("call " + callId + " already holds slots on worker " + id);
    }
    slots.reserve(demand, gpuIds);
    reservations.put(callId, new Reservation(demand, List.copyOf(gpuIds)));
  }

  /**
   * Gives back what {@link #reserve} took for the call. Idempotent: a call that holds nothing
   * here (released already, or never placed here) frees nothing, so a second release cannot
   * free GPUs another call has taken since.
   *
   * @return whether the call held slots here
   */
  public boolean release(String callId) {
    Reservation reservation = reservations.remove(callId);
    if (reservation == null) {
      return false;
    }
    slots.free(reservation.demand(), reservation.gpuIds());
    if (reservations.isEmpty()) {
      idleSince = Instant.now();
    }
    return true;
  }

  /** Takes no new call from now on (its pool is replacing or stopping it). */
  void drain(String reason) {
    drainReason = reason;
    drains++;
  }

  /**
   * Moves whenever what a scheduling pass reads of this worker changes (its free slots, its
   * drain, its resident GPUs; the rest is fixed at attach), so the pass may keep its view of
   * the worker until then. A sum of counters that only grow: it moves when any of them does.
   */
  public long generation() {
    return slots.version() + residentGpus.version() + drains;
  }

  /** Why it takes no new call, or null while it does. */
  public String drainReason() {
    return drainReason;
  }

  /**
   * Whether a call that may run {@code runSeconds} can still finish here before the worker's
   * allocation ends. A worker without an end takes everything; a drained one nothing.
   */
  public boolean canFinish(double nowEpochSeconds, double runSeconds) {
    if (drainReason != null) {
      return false;
    }
    return expiresAtEpochSeconds <= 0 || nowEpochSeconds + runSeconds < expiresAtEpochSeconds;
  }

  /**
   * The slots of the workers where {@code task} can finish before their allocation ends: its
   * timeout, or else {@code drainMarginSeconds}, before it (see {@link #canFinish}).
   */
  public static List<WorkerSlots> whereItCanFinish(dev.bulletin.runtime.task.Task task,
      java.util.Collection<AttachedWorker> workers, double nowEpochSeconds,
      double drainMarginSeconds) {
    double mayRun = task.timeoutSeconds() > 0 ? task.timeoutSeconds() : drainMarginSeconds;
    List<WorkerSlots> candidates = new java.util.ArrayList<>(workers.size());
    for (AttachedWorker worker : workers) {
      if (worker.canFinish(nowEpochSeconds, mayRun)) {
        candidates.add(worker.slots());
      }
    }
    return candidates;
  }

  /** Draining: its allocation ends within {@code marginSeconds}, so it takes no call without a timeout. */
  public boolean draining(double nowEpochSeconds, double marginSeconds) {
    return !canFinish(nowEpochSeconds, marginSeconds);
  }
}
