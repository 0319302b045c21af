package dev.bulletin.runtime.scheduler;

import dev.bulletin.protocol.Text;
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
  private final int gpus;
  private final boolean simulatedGpus;
  private final double cpus;
  private final long memoryBytes;
  private final TreeSet<Integer> freeGpus = new TreeSet<>();
  private double freeCpus;
  private long freeMemory;

  public WorkerSlots(String workerId, int gpus, boolean simulatedGpus, double cpus, long memoryBytes) {
    this.workerId = workerId;
    this.gpus = gpus;
    this.simulatedGpus = simulatedGpus;
    this.cpus = cpus;
    this.memoryBytes = memoryBytes;
    for (int i = 0; i < gpus; i++) {
      freeGpus.add(i);
    }
    this.freeCpus = cpus;
    this.freeMemory = memoryBytes;
  }

  public String workerId() {
    return workerId;
  }

  public int gpus() {
    return gpus;
  }

  public boolean simulatedGpus() {
    return simulatedGpus;
  }

  public double cpus() {
    return cpus;
  }

  public long memoryBytes() {
    return memoryBytes;
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

  /** Could this worker run the demand if it were idle? */
  public boolean couldEverFit(Demand demand) {
    return demand.gpus() <= gpus && demand.cpus() <= cpus && demand.memoryBytes() <= memoryBytes;
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
    freeCpus = Math.min(cpus, freeCpus + demand.cpus());
    freeMemory = Math.min(memoryBytes, freeMemory + demand.memoryBytes());
  }

  public String describeCapacity() {
    return Text.count(gpus, "GPU") + (simulatedGpus ? " (simulated)" : "") + ", "
        + Text.count(cpus, "CPU") + ", " + Text.bytes(memoryBytes) + " memory";
  }
}
