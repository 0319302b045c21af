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
  private double freeCpus;
  private long freeMemory;

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

  public boolean fitsNow(Demand demand) {
    return demand.gpus() <= freeGpus.size() && demand.cpus() <= freeCpus + 1e-9
        && demand.memoryBytes() <= freeMemory;
  }

  /** The free GPUs' ids, a copy. */
  public java.util.Set<Integer> freeGpuIds() {
    return java.util.Set.copyOf(freeGpus);
  }

  /** The lowest-numbered free GPUs, without taking them. */
  public List<Integer> lowestFreeGpus(int count) {
    return freeGpus.stream().limit(count).toList();
  }

  /** Takes the named GPUs and the demand's CPUs and memory. */
  public void reserve(Demand demand, List<Integer> gpuIds) {
    if (!fitsNow(demand) || gpuIds.size() != demand.gpus() || !freeGpus.containsAll(gpuIds)) {
      throw new IllegalStateException("worker " + workerId + " cannot fit " + demand + " on GPUs "
          + gpuIds + " now");
    }
    freeGpus.removeAll(gpuIds);
    freeCpus -= demand.cpus();
    freeMemory -= demand.memoryBytes();
  }

  public void free(Demand demand, List<Integer> gpuIds) {
    freeGpus.addAll(gpuIds);
    freeCpus = Math.min(capacity.cpus(), freeCpus + demand.cpus());
    freeMemory = Math.min(capacity.memoryBytes(), freeMemory + demand.memoryBytes());
  }

  /**
   * Why none of {@code workers} can take the demand now (none fits now): the first resource,
   * GPUs, then CPUs, then memory, that no worker has free, in the caller's words. What a call
   * the scheduler has not explained yet is told, and the FIFO baseline's wait reason.
   */
  public static String whyNoneFitsNow(Demand demand, Collection<WorkerSlots> workers) {
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
