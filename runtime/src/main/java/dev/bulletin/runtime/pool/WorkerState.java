package dev.bulletin.runtime.pool;

/** Where a pool's worker stands, as the scaling policy sees it. */
public enum WorkerState {
  /** Launched (or queued at the provider) and not registered yet. */
  STARTING,
  /** Registered and running no call. */
  IDLE,
  /** Registered and running at least one call. */
  BUSY,
  /** Takes no new call; stopped once its running calls end. */
  DRAINING
}
