package dev.bulletin.runtime.pool;

import dev.bulletin.protocol.Text;
/**
 * Calls that wait because no current worker can serve them, grouped by size.
 *
 * @param gpus GPUs one call asks for
 * @param cpus CPUs one call asks for
 * @param memoryBytes memory one call asks for (0 = any)
 * @param count how many calls of this size wait
 */
public record PendingDemand(int gpus, double cpus, long memoryBytes, int count) {
  public PendingDemand {
    if (gpus < 0 || !(cpus > 0) || Double.isInfinite(cpus) || memoryBytes < 0 || count < 0) {
      throw new IllegalArgumentException("pending demand needs gpus >= 0, cpus > 0, memory >= 0 and"
          + " count >= 0, got gpus=" + gpus + " cpus=" + cpus + " memory=" + memoryBytes
          + " count=" + count);
    }
  }

  public static PendingDemand of(int count, int gpus) {
    return new PendingDemand(gpus, 1, 0, count);
  }

  @Override
  public String toString() {
    return Text.count(count, "call") + " of " + Text.count(gpus, "GPU");
  }
}
