package dev.bulletin.runtime.usage;

import java.time.Instant;

/**
 * One ended call in the usage ledger.
 *
 * @param gpus GPUs it asked for: whole GPUs, or its share of one (0.5)
 * @param queuedSeconds from submit to its (last) placement
 * @param reservedSeconds how long its slots were reserved, over all its attempts
 * @param runningSeconds how long its executor ran it, over all its attempts
 * @param gpuSecondsReserved GPUs (a share as its fraction) times reserved seconds
 * @param gpuSecondsBusy of those, what the GPUs really computed (utilisation samples)
 * @param creditsSpent credits its group paid for its place in the queue
 * @param outcome "finished", "error", "cancelled", or "error:TIMED_OUT" and the like
 * @param calls the user's calls it stands for: 1, or the calls a lease ran (issue 30), whose
 *     reserved and running time are the lease's
 */
public record UsageRecord(String taskId, String name, String user, String group, String qos,
    String worker, double gpus, Instant submittedAt, Instant endedAt, double queuedSeconds,
    double reservedSeconds, double runningSeconds, double gpuSecondsReserved,
    double gpuSecondsBusy, double creditsSpent, int attempts, String outcome, long calls) {

  /** A record of one call. */
  public UsageRecord(String taskId, String name, String user, String group, String qos,
      String worker, double gpus, Instant submittedAt, Instant endedAt, double queuedSeconds,
      double reservedSeconds, double runningSeconds, double gpuSecondsReserved,
      double gpuSecondsBusy, double creditsSpent, int attempts, String outcome) {
    this(taskId, name, user, group, qos, worker, gpus, submittedAt, endedAt, queuedSeconds,
        reservedSeconds, runningSeconds, gpuSecondsReserved, gpuSecondsBusy, creditsSpent,
        attempts, outcome, 1);
  }
}
