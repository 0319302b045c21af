package dev.bulletin.runtime.scheduler.policy;

import java.time.Duration;

/**
 * Backfill reservations for big calls: a call asking at least {@code minGpus} GPUs (0: as many
 * as the largest worker has, a whole box) that has waited {@code after} gets GPUs reserved on the
 * worker where they free soonest (by the walltimes of what runs there, preemptible work counting
 * as freeing its GPUs within the preemption grace, as the reserved call may reclaim it); until
 * then only calls that end before the reservation starts, by their walltime, may use that
 * worker's GPUs. At most {@code maxReservations} calls hold one at a time, the oldest first.
 * Without it a stream of smaller, higher-ordered calls keeps taking every GPU that frees and a
 * big call can wait for hours.
 *
 * @param after how long a big call waits before it gets a reservation ({@code unlimited}: never)
 * @param minGpus what counts as big; 0 for a whole worker (the most GPUs any worker has, and
 *     at least 2)
 * @param maxReservations reservations held at once (0 turns backfill off)
 */
public record Backfill(Duration after, int minGpus, int maxReservations) {

  /** {@code minGpus} meaning "as many GPUs as the largest worker has". */
  public static final int WHOLE_WORKER = 0;

  public Backfill {
    if (after == null || after.isNegative()) {
      throw new IllegalArgumentException("scheduler.backfill.after must be a duration >= 0");
    }
    if (minGpus < 0) {
      throw new IllegalArgumentException("scheduler.backfill.min_gpus must be >= 1 or"
          + " whole-worker, got " + minGpus);
    }
    if (maxReservations < 0) {
      throw new IllegalArgumentException("scheduler.backfill.max_reservations must be >= 0, got "
          + maxReservations);
    }
  }

  /**
   * On by default: calls that need a whole worker and waited 10 minutes reserve one, at most 16
   * at a time. In the 1.05-load simulation (docs/scheduler.md) this brings the 8-GPU calls' p95
   * wait from 4.9 h to 19 min (FIFO: 61 min), at the cost of everyone else's tail.
   */
  public static Backfill defaults() {
    return new Backfill(Duration.ofMinutes(10), WHOLE_WORKER, 16);
  }

  public static Backfill off() {
    return new Backfill(Duration.ofMinutes(10), WHOLE_WORKER, 0);
  }

  /**
   * Whether a call of {@code gpus} GPUs that has waited {@code waitedMillis} gets a reservation,
   * on a cluster whose largest worker has {@code largestWorker} GPUs.
   */
  public boolean reserves(int gpus, long waitedMillis, int largestWorker) {
    // A one-GPU call fits any GPU that frees: it can wait on priority, never on fragmentation.
    int big = minGpus == WHOLE_WORKER ? Math.max(2, largestWorker) : minGpus;
    return maxReservations > 0 && gpus >= big && waitedMillis >= after.toMillis();
  }
}
