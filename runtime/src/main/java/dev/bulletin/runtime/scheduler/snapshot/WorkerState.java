package dev.bulletin.runtime.scheduler.snapshot;

import java.time.Instant;
import java.util.Map;
import java.util.Set;

/**
 * One worker as the scheduler sees it at the start of a pass.
 *
 * @param freeGpus the CUDA indices not reserved by a running call (a GPU fractional calls share
 *     is not free; the scheduler reads how much of it is taken from the running calls)
 * @param heldObjects objects already in the worker's store, id to size in bytes (data locality)
 * @param draining takes no new calls (being retired)
 * @param expiresAt when the worker goes away (a Slurm allocation's end); {@link #NEVER} if not
 * @param residentGpus GPUs that keep a notebook session's state between its cells (issue 29),
 *     CUDA index to the key of the session whose state it is: the same key a queued call reading
 *     that state carries as {@link QueuedCall#residentSession}. Such a GPU is free for others
 *     (list it in {@code freeGpus} too), but a call of another session that takes it makes the
 *     worker spill the state first and that session's next cell restore it. The scheduler only
 *     compares keys for equality; the runtime fills them from what the agent reports (which
 *     idle executor keeps values on which GPU). Empty: nothing is kept, or not known.
 */
public record WorkerState(
    String id,
    GpuTopology topology,
    Set<Integer> freeGpus,
    double cpus,
    double freeCpus,
    long memoryBytes,
    long freeMemoryBytes,
    Map<String, Long> heldObjects,
    boolean draining,
    Instant expiresAt,
    Map<Integer, String> residentGpus) {

  public static final Instant NEVER = Instant.MAX;

  public WorkerState {
    require(id != null && !id.isBlank(), () -> "worker.id is required");
    require(topology != null, () -> "worker " + id + ": topology is required");
    freeGpus = Set.copyOf(freeGpus); // the same set when it is one already (WorkerSlots)
    for (int gpu : freeGpus) {
      require(gpu >= 0 && gpu < topology.gpus(), () -> "worker " + id + ": free GPU " + gpu
          + " is outside 0.." + (topology.gpus() - 1));
    }
    require(cpus >= 0 && freeCpus >= 0 && freeCpus <= cpus + 1e-9,
        () -> "worker " + id + ": freeCpus must be within 0..cpus, got " + freeCpus + " of " + cpus);
    require(memoryBytes >= 0 && freeMemoryBytes >= 0 && freeMemoryBytes <= memoryBytes,
        () -> "worker " + id + ": freeMemoryBytes must be within 0..memoryBytes");
    heldObjects = heldObjects == null ? Map.of() : Map.copyOf(heldObjects);
    expiresAt = expiresAt == null ? NEVER : expiresAt;
    residentGpus = residentGpus == null ? Map.of() : Map.copyOf(residentGpus);
    for (Map.Entry<Integer, String> kept : residentGpus.entrySet()) {
      require(kept.getKey() >= 0 && kept.getKey() < topology.gpus(), () -> "worker " + id
          + ": resident GPU " + kept.getKey() + " is outside 0.." + (topology.gpus() - 1));
      require(!kept.getValue().isBlank(), () -> "worker " + id + ": resident GPU " + kept.getKey()
          + " needs the key of the session whose state it keeps");
    }
  }

  /** A worker that keeps no session's state on its GPUs (or whose runtime does not say). */
  public WorkerState(String id, GpuTopology topology, Set<Integer> freeGpus, double cpus,
      double freeCpus, long memoryBytes, long freeMemoryBytes, Map<String, Long> heldObjects,
      boolean draining, Instant expiresAt) {
    this(id, topology, freeGpus, cpus, freeCpus, memoryBytes, freeMemoryBytes, heldObjects,
        draining, expiresAt, Map.of());
  }

  /** This worker with {@code residentGpus} (GPU index to session key) in place of its own. */
  public WorkerState withResidentGpus(Map<Integer, String> residentGpus) {
    return new WorkerState(id, topology, freeGpus, cpus, freeCpus, memoryBytes, freeMemoryBytes,
        heldObjects, draining, expiresAt, residentGpus);
  }

  public int gpus() {
    return topology.gpus();
  }

  /** The free GPUs as a bit mask (bit i = GPU i). */
  public long freeGpuMask() {
    long mask = 0;
    for (int gpu : freeGpus) {
      mask |= 1L << gpu;
    }
    return mask;
  }

  /** The message is built only for a refusal: every pass checks every worker's state. */
  private static void require(boolean condition, java.util.function.Supplier<String> message) {
    if (!condition) {
      throw new IllegalArgumentException(message.get());
    }
  }
}
