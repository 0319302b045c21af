package dev.bulletin.runtime.scheduler.policy;

import java.time.Duration;

/**
 * Backfill reservations for big calls: a call asking at least {@code minGpus} GPUs that has
 * waited {@code after} gets GPUs reserved on the worker where they free soonest (by the walltimes
 * of what runs there); until then only calls that end before the reservation starts, by their
 * walltime, may use that worker's GPUs. At most {@code maxReservations} calls hold one at a time,
 * the oldest first. Without it a stream of smaller, higher-ordered calls keeps taking every GPU
 * that frees and a big call can wait for hours.
 *
 * @param after how long a big call waits before it gets a reservation ({@code unlimited}: never)
 * @param minGpus what counts as big
 * @param maxReservations reservations held at once (0 turns backfill off)
 */
public record Backfill(Duration after, int minGpus, int maxReservations) {

  public Backfill {
    if (after == null || after.isNegative()) {
      throw new IllegalArgumentException("scheduler.backfill.after must be a duration >= 0");
    }
    if (minGpus < 1) {
      throw new IllegalArgumentException("scheduler.backfill.min_gpus must be >= 1, got "
          + minGpus);
    }
    if (maxReservations < 0) {
      throw new IllegalArgumentException("scheduler.backfill.max_reservations must be >= 0, got "
          + maxReservations);
    }
  }

  /**
   * What a {@code scheduler.backfill} section starts from. Backfill is off unless the config has
   * that section: in the 1.05-load simulation it brings the 8-GPU calls' p95 wait down to FIFO's
   * but multiplies everyone's p95 wait by ten and preemptions by seven (docs/scheduler.md).
   */
  public static Backfill defaults() {
    return new Backfill(Duration.ofMinutes(30), 4, 16);
  }

  public static Backfill off() {
    return new Backfill(Duration.ofMinutes(30), 4, 0);
  }

  /** Whether a call of {@code gpus} GPUs that has waited {@code waitedMillis} gets a reservation. */
  public boolean reserves(int gpus, long waitedMillis) {
    return maxReservations > 0 && gpus >= minGpus && waitedMillis >= after.toMillis();
  }
}
