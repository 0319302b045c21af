package dev.bulletin.runtime.pool;

import dev.bulletin.protocol.Text;
import java.time.Duration;
import java.util.Optional;

/**
 * What one worker of a pool offers: GPUs, CPUs, memory, and for batch providers the walltime of
 * its allocation. Validated on construction.
 *
 * @param gpus GPUs per worker (0 for a CPU pool)
 * @param cpus CPU cores per worker
 * @param memoryBytes memory per worker; 0 means unspecified (the provider's default)
 * @param walltime how long an allocation lives; {@link Duration#ZERO} means unlimited
 */
public record WorkerShape(int gpus, int cpus, long memoryBytes, Duration walltime) {

  public WorkerShape {
    if (gpus < 0) {
      throw new IllegalArgumentException("worker.gpus must be >= 0, got " + gpus);
    }
    if (cpus < 1) {
      throw new IllegalArgumentException("worker.cpus must be >= 1, got " + cpus);
    }
    if (memoryBytes < 0) {
      throw new IllegalArgumentException("worker.memory must be >= 0, got " + memoryBytes);
    }
    if (walltime == null || walltime.isNegative()) {
      throw new IllegalArgumentException("worker.walltime must be a positive duration, got " + walltime);
    }
  }

  public Optional<Long> memory() {
    return memoryBytes == 0 ? Optional.empty() : Optional.of(memoryBytes);
  }

  public Optional<Duration> walltimeLimit() {
    return walltime.isZero() ? Optional.empty() : Optional.of(walltime);
  }

  /** Whether one call of this size fits on one such worker. */
  public boolean fits(PendingDemand demand) {
    return demand.gpus() <= gpus && demand.cpus() <= cpus
        && (memoryBytes == 0 || demand.memoryBytes() <= memoryBytes);
  }

  /**
   * The fraction of one worker a call of this size takes, by its scarcest resource; the policy
   * sums these to size a scale-up without pretending calls split across workers.
   */
  public double share(PendingDemand demand) {
    double share = demand.cpus() / cpus;
    if (gpus > 0) {
      share = Math.max(share, (double) demand.gpus() / gpus);
    }
    if (memoryBytes > 0) {
      share = Math.max(share, (double) demand.memoryBytes() / memoryBytes);
    }
    // Calls that do not divide a worker evenly leave a gap: 3 one-GPU-and-a-half calls do not fit
    // two 2-GPU workers. Counting per whole call on a worker keeps the estimate from falling short.
    int perWorker = (int) Math.floor(1.0 / share + 1e-9);
    return perWorker <= 0 ? 1.0 : 1.0 / perWorker;
  }

  @Override
  public String toString() {
    return Text.count(gpus, "GPU") + ", " + Text.count(cpus, "CPU")
        + (memoryBytes > 0 ? ", " + Text.bytes(memoryBytes) : "")
        + (walltime.isZero() ? "" : ", walltime " + Text.duration(walltime));
  }
}
