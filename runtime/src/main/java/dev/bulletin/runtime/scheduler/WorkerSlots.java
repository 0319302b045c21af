package dev.bulletin.runtime.scheduler;

import dev.bulletin.protocol.Text;
import java.util.Collection;
import java.util.List;
import java.util.TreeSet;

/**
 * A worker's capacity and what is free of it. Owned by the control plane; the scheduler reads it.
 * In the runtime, slots are taken and given back only through
 * {@code workers.AttachedWorker#reserve} and {@code #release}, which remember what each call
 * holds; {@link #reserve} and {@link #free} here are the arithmetic under them.
 */
public final class WorkerSlots {
  private final String workerId;
  private final WorkerCapacity capacity;
  private final TreeSet<Integer> freeGpus = new TreeSet<>();
  /** {@link #freeGpuIds}'s copy until the free GPUs change: every pass reads every worker's. */
  private java.util.Set<Integer> freeView;
  /**
   * GPUs fractional calls share: GPU id to the eighths they hold (1..8). Such a GPU is not in
   * {@link #freeGpus}: a whole-GPU call never gets it, until its last share is freed.
   */
  private final java.util.TreeMap<Integer, Integer> sharedEighths = new java.util.TreeMap<>();
  private double freeCpus;
  private long freeMemory;
  private long version;

  public WorkerSlots(String workerId, int gpus, boolean simulatedGpus, double cpus, long memoryBytes) {
    this.workerId = workerId;
    this.capacity = new WorkerCapacity(gpus, simulatedGpus, cpus, memoryBytes);
    for (int i = 0; i < gpus; i++) {
      freeGpus.add(i);
    }
    this.freeCpus = cpus;
    this.freeMemory = memoryBytes;
  }

  public String workerId() {
    return workerId;
  }

  /** The whole worker, busy or idle: what feasibility compares against. */
  public WorkerCapacity capacity() {
    return capacity;
  }

  public int gpus() {
    return capacity.gpus();
  }

  public boolean simulatedGpus() {
    return capacity.simulatedGpus();
  }

  public double cpus() {
    return capacity.cpus();
  }

  public long memoryBytes() {
    return capacity.memoryBytes();
  }

  public int freeGpuCount() {
    return freeGpus.size();
  }

  public double freeCpus() {
    return freeCpus;
  }

  public long freeMemory() {
    return freeMemory;
  }

  /** Moves whenever anything free here changes: snapshots kept between passes compare it. */
  public long version() {
    return version;
  }

  public boolean fitsNow(Demand demand) {
    boolean gpus = demand.fractional()
        ? !freeGpus.isEmpty() || sharedEighths.values().stream()
            .anyMatch(held -> held + demand.gpuEighths() <= Demand.EIGHTHS)
        : demand.gpus() <= freeGpus.size();
    return gpus && demand.cpus() <= freeCpus + 1e-9 && demand.memoryBytes() <= freeMemory;
  }

  /** GPUs fractional calls share, GPU id to the share held (0.75: three quarters); a copy. */
  public java.util.Map<Integer, Double> sharedGpus() {
    java.util.Map<Integer, Double> shares = new java.util.TreeMap<>();
    sharedEighths.forEach((gpu, eighths) -> shares.put(gpu, eighths / (double) Demand.EIGHTHS));
    return shares;
  }

  /** Reserved GPUs with a shared GPU counted as its shares (1.5: one whole, two quarters). */
  public double reservedGpuShare() {
    int shared = sharedEighths.values().stream().mapToInt(Integer::intValue).sum();
    return capacity.gpus() - freeGpus.size() - sharedEighths.size()
        + shared / (double) Demand.EIGHTHS;
  }

  /** The free GPUs' ids, a copy. */
  public java.util.Set<Integer> freeGpuIds() {
    if (freeView == null) {
      freeView = java.util.Set.copyOf(freeGpus);
    }
    return freeView;
  }

  /** The lowest-numbered free GPUs, without taking them. */
  public List<Integer> lowestFreeGpus(int count) {
    return freeGpus.stream().limit(count).toList();
  }

  /** Takes the named GPUs and the demand's CPUs and memory. */
  public void reserve(Demand demand, List<Integer> gpuIds) {
    boolean gpusFree = demand.fractional() ? gpuIds.size() == 1 && (freeGpus.contains(gpuIds.get(0))
        || sharedEighths.getOrDefault(gpuIds.get(0), Demand.EIGHTHS) + demand.gpuEighths()
            <= Demand.EIGHTHS)
        : gpuIds.size() == demand.gpus() && freeGpus.containsAll(gpuIds);
    if (!fitsNow(demand) || !gpusFree) {
      throw new IllegalStateException("worker " + workerId + " cannot fit " + demand + " on GPUs "
          + gpuIds + " now");
    }
    freeGpus.removeAll(gpuIds);
    freeView = null;
    version++;
    if (demand.fractional()) {
      sharedEighths.merge(gpuIds.get(0), demand.gpuEighths(), Integer::sum);
    }
    freeCpus -= demand.cpus();
    freeMemory -= demand.memoryBytes();
  }

  public void free(Demand demand, List<Integer> gpuIds) {
    freeView = null;
    version++;
    if (demand.fractional()) {
      int gpu = gpuIds.get(0);
      Integer left = sharedEighths.computeIfPresent(gpu, (id, held) ->
          held > demand.gpuEighths() ? held - demand.gpuEighths() : null);
      if (left == null) {
        freeGpus.add(gpu); // its last share: whole-GPU calls may have it again
      }
    } else {
      freeGpus.addAll(gpuIds);
    }
    freeCpus = Math.min(capacity.cpus(), freeCpus + demand.cpus());
    freeMemory = Math.min(capacity.memoryBytes(), freeMemory + demand.memoryBytes());
  }

  /**
   * Why none of {@code workers} can take the demand now (none fits now): the first resource,
   * GPUs, then CPUs, then memory, that no worker has free, in the caller's words. What a call
   * the scheduler has not explained yet is told, and the FIFO baseline's wait reason.
   */
  public static String whyNoneFitsNow(Demand demand, Collection<WorkerSlots> workers) {
    if (demand.fractional() && workers.stream().noneMatch(w -> w.fitsNow(
        new Demand(0, 1e-9, 0, demand.gpuEighths())))) {
      return "no GPU has " + Text.number(demand.gpuShare()) + " of a GPU free to share";
    }
    if (demand.gpus() > 0) {
      int mostFree = workers.stream().mapToInt(WorkerSlots::freeGpuCount).max().orElse(0);
      if (mostFree < demand.gpus()) {
        return "no worker has " + Text.count(demand.gpus(), "GPU")
            + " free (most free on one worker: " + mostFree + ")";
      }
    }
    double mostCpus = workers.stream().mapToDouble(WorkerSlots::freeCpus).max().orElse(0);
    if (mostCpus < demand.cpus()) {
      return "no worker has " + Text.count(demand.cpus(), "CPU") + " free (most free: "
          + Text.number(mostCpus) + ")";
    }
    return "no worker has " + Text.bytes(demand.memoryBytes()) + " memory free";
  }
}
