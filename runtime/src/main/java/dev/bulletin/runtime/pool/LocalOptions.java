package dev.bulletin.runtime.pool;

import java.time.Duration;

/**
 * How a local pool runs its worker processes.
 *
 * @param simulateGpus workers advertise {@code worker.gpus} simulated GPUs (machines without GPUs)
 * @param terminateGrace time between SIGTERM and SIGKILL when a worker is stopped
 */
public record LocalOptions(boolean simulateGpus, Duration terminateGrace) {
  public LocalOptions {
    if (terminateGrace == null || terminateGrace.isNegative()) {
      throw new IllegalArgumentException("local.terminate_grace must be >= 0, got " + terminateGrace);
    }
  }

  public static LocalOptions defaults() {
    return new LocalOptions(false, Duration.ofSeconds(10));
  }
}
