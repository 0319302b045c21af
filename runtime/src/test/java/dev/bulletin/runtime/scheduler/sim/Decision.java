package dev.bulletin.runtime.scheduler.sim;

import java.util.List;

/**
 * The FIFO baseline's answer for one call. "Not now" and "never" are different answers: a
 * waiting call stays queued with its reason, an infeasible one fails at once.
 */
sealed interface Decision {

  /** Run it on this worker with these GPUs. */
  record Placed(String workerId, List<Integer> gpuIds) implements Decision {
    public Placed {
      gpuIds = List.copyOf(gpuIds);
    }
  }

  /** Not now; {@code reason} says what it waits for, in the caller's words. */
  record Wait(String reason) implements Decision {}

  /** Never on this cluster as it is; {@code reason} says what the cluster has. */
  record Infeasible(String reason) implements Decision {}
}
