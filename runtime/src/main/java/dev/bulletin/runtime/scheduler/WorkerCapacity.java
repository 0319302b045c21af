package dev.bulletin.runtime.scheduler;

import dev.bulletin.protocol.Text;
/**
 * A worker's whole capacity, busy or idle: what "can this call ever run here" compares against.
 * {@code simulatedGpus} only changes how it reads ("1 GPU (simulated)").
 */
public record WorkerCapacity(int gpus, boolean simulatedGpus, double cpus, long memoryBytes) {
  public WorkerCapacity {
    if (gpus < 0 || !(cpus >= 0) || memoryBytes < 0) {
      throw new IllegalArgumentException("worker capacity must be >= 0, got " + gpus + " GPUs, "
          + cpus + " CPUs, " + memoryBytes + " bytes of memory");
    }
  }

  /** Could this worker run the demand if it were idle? */
  public boolean fits(Demand demand) {
    return demand.gpusTouched() <= gpus && demand.cpus() <= cpus + 1e-9
        && demand.memoryBytes() <= memoryBytes;
  }

  @Override
  public String toString() {
    return Text.count(gpus, "GPU") + (simulatedGpus ? " (simulated)" : "") + ", "
        + Text.count(cpus, "CPU") + ", " + Text.bytes(memoryBytes) + " memory";
  }
}
