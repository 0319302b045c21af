package dev.bulletin.runtime.pool.impl;

import dev.bulletin.runtime.pool.PoolWorker;
import dev.bulletin.runtime.pool.WorkerHandle;
import dev.bulletin.runtime.pool.WorkerState;
import java.time.Instant;
import java.util.Optional;

/** The autoscaler's record of one worker it launched or adopted. Owner thread only. */
final class TrackedWorker {
  final String id;
  final String pool;
  final WorkerHandle handle;
  final Instant launchedAt;
  /** Orders launches against provider listings: a listing asked for earlier cannot show it. */
  final long sequence;
  /** When the provider first showed it running; null while it waits (a queued Slurm job). */
  Instant runningSince;
  boolean registered;
  boolean draining;
  boolean terminating;
  int runningCalls;
  Instant idleSince;
  Optional<Instant> expiresAt = Optional.empty();
  /**
   * Launched by an earlier runtime: it reattaches rather than registers, and one that is gone
   * or never reattaches does not count as a failed launch (it ran before the restart).
   */
  boolean adopted;
  /** By when an adopted worker must reattach (it is stopped then); null: no limit. */
  Instant adoptedUntil;

  TrackedWorker(String id, String pool, WorkerHandle handle, Instant launchedAt, long sequence) {
    this.id = id;
    this.pool = pool;
    this.handle = handle;
    this.launchedAt = launchedAt;
    this.sequence = sequence;
    this.idleSince = launchedAt;
  }

  /**
   * The policy's view. A worker still waiting in the provider's queue is "starting since now", so
   * start_timeout counts only from when its job runs: a busy Slurm queue is not a broken worker.
   */
  PoolWorker view(Instant now) {
    if (!registered) {
      return new PoolWorker(id, WorkerState.STARTING, runningSince != null ? runningSince : now, 0, expiresAt);
    }
    if (draining) {
      return new PoolWorker(id, WorkerState.DRAINING, idleSince, runningCalls, expiresAt);
    }
    return new PoolWorker(id, runningCalls > 0 ? WorkerState.BUSY : WorkerState.IDLE, idleSince,
        runningCalls, expiresAt);
  }
}
