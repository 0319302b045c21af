package dev.bulletin.runtime.pool;

import java.time.Instant;
import java.util.Optional;

/**
 * One worker of a pool as the policy sees it.
 *
 * @param workerId the id the pool gave it at launch (it registers with it)
 * @param state where it stands
 * @param since STARTING: when its process or job started running (now while it waits in a
 *     queue); IDLE: when its last call ended; otherwise when it entered the state
 * @param runningCalls calls running on it (a DRAINING worker with none is stopped)
 * @param expiresAt when its allocation ends (Slurm walltime); empty = never
 */
public record PoolWorker(String workerId, WorkerState state, Instant since, int runningCalls,
    Optional<Instant> expiresAt) {

  public PoolWorker {
    if (workerId == null || state == null || since == null || expiresAt == null || runningCalls < 0) {
      throw new IllegalArgumentException("a pool worker needs an id, a state, a since time, an"
          + " expiry (or none) and runningCalls >= 0");
    }
  }

  public static PoolWorker of(String workerId, WorkerState state, Instant since) {
    return new PoolWorker(workerId, state, since, state == WorkerState.BUSY ? 1 : 0, Optional.empty());
  }

  public PoolWorker expiringAt(Instant expiry) {
    return new PoolWorker(workerId, state, since, runningCalls, Optional.of(expiry));
  }
}
