package dev.bulletin.runtime.workers;

import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.logging.Logger;

/**
 * Calls a worker reported when it (re)attached that the runtime had given up meanwhile (they
 * were requeued or ended while its link was down): the worker stops them, and what it still
 * says of their old runs (an output line, an end it had kept to send again) is refused, never
 * taken for a later attempt of the same call. A protocol message names a call by its task id
 * only, so until each old run's end has arrived the worker takes no new call (it is drained):
 * a new attempt placed there meanwhile could not be told from the old run.
 */
final class GivenUpCalls {
  private static final Logger LOG = Logger.getLogger(GivenUpCalls.class.getName());
  /** How long the worker stays drained for ends that do not come (see {@link #stopWaiting}). */
  static final long WAIT_MILLIS = 30_000;

  private final String workerId;
  private final Set<String> taskIds;
  private final Runnable whenNoneLeft;

  private GivenUpCalls(String workerId, List<String> taskIds, Runnable whenNoneLeft) {
    this.workerId = workerId;
    this.taskIds = new HashSet<>(taskIds);
    this.whenNoneLeft = whenNoneLeft;
  }

  static GivenUpCalls none() {
    return new GivenUpCalls("", List.of(), () -> { });
  }

  /**
   * Watches {@code taskIds} on {@code worker}: it is drained (keeping a drain it had) until each
   * one's old run has ended; nothing happens for an empty list.
   */
  static GivenUpCalls watch(AttachedWorker worker, List<String> taskIds, Runnable reschedule) {
    if (taskIds.isEmpty() || worker.drainReason() != null) {
      // Drained already (its pool's drain): it takes no new call anyway.
      return new GivenUpCalls(worker.id(), taskIds, () -> { });
    }
    String ours = "stopping " + taskIds.size() + " calls the runtime gave up while its link was"
        + " down";
    worker.drain(ours);
    return new GivenUpCalls(worker.id(), taskIds, () -> {
      if (ours.equals(worker.drainReason())) { // not drained since for another reason
        worker.drain(null);
        reschedule.run();
      }
    });
  }

  /**
   * The old runs' ends are waited for no longer (the worker lost them): the worker takes new
   * calls again, and what it says of those calls from now on is about their new runs.
   */
  void stopWaiting() {
    if (!taskIds.isEmpty()) {
      int missing = taskIds.size();
      taskIds.clear();
      LOG.warning(() -> "worker " + workerId + " did not send the end of " + missing
          + " calls' runs the runtime gave up within " + WAIT_MILLIS / 1000 + " s: it takes"
          + " new calls again");
      whenNoneLeft.run();
    }
  }

  /** Whether a report (started, output) on this call is from a given-up run: refused. */
  boolean refuses(String taskId) {
    return taskIds.contains(taskId);
  }

  /**
   * The end of a call's run arrived: true if that run was given up (the end is refused; its
   * result is not taken). The last such end lets the worker take new calls again.
   */
  boolean refusesEnd(String taskId) {
    if (!taskIds.remove(taskId)) {
      return false;
    }
    LOG.info(() -> "worker " + workerId + " sent the end of call " + taskId + "'s run that the"
        + " runtime gave up while the worker was away: refused (the call is not ended by it)");
    if (taskIds.isEmpty()) {
      whenNoneLeft.run();
    }
    return true;
  }
}
