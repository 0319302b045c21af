package dev.bulletin.runtime.scheduler.snapshot;

import java.time.Instant;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * One worker as the scheduler sees it at the start of a pass.
 *
 * @param freeGpus the CUDA indices not reserved by a running call (a GPU fractional calls share
 *     is not free; the scheduler reads how much of it is taken from the running calls)
 * @param heldObjects objects already in the worker's store, id to size in bytes (data locality)
 * @param draining takes no new calls (being retired)
 * @param expiresAt when the worker goes away (a Slurm allocation's end); {@link #NEVER} if not
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
    Instant expiresAt) {

  public static final Instant NEVER = Instant.MAX;

  public WorkerState {
    require(id != null && !id.isBlank(), "worker.id is required");
    require(topology != null, "worker " + id + ": topology is required");
    freeGpus = Set.copyOf(new TreeSet<>(freeGpus));
    for (int gpu : freeGpus) {
      require(gpu >= 0 && gpu < topology.gpus(), "worker " + id + ": free GPU " + gpu
          + " is outside 0.." + (topology.gpus() - 1));
    }
    require(cpus >= 0 && freeCpus >= 0 && freeCpus <= cpus + 1e-9,
        "worker " + id + ": freeCpus must be within 0..cpus, got " + freeCpus + " of " + cpus);
    require(memoryBytes >= 0 && freeMemoryBytes >= 0 && freeMemoryBytes <= memoryBytes,
        "worker " + id + ": freeMemoryBytes must be within 0..memoryBytes");
    heldObjects = heldObjects == null ? Map.of() : Map.copyOf(heldObjects);
    expiresAt = expiresAt == null ? NEVER : expiresAt;
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

  private static void require(boolean condition, String message) {
    if (!condition) {
      throw new IllegalArgumentException(message);
    }
  }
}
