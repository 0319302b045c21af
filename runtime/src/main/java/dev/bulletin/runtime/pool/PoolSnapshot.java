package dev.bulletin.runtime.pool;

import java.util.List;

/**
 * What the policy decides on: the pool's workers, the calls waiting that no current worker can
 * serve (routed to this pool), and launches asked of the provider that have not answered yet.
 */
public record PoolSnapshot(List<PoolWorker> workers, List<PendingDemand> pending, int launchesInFlight) {
  public PoolSnapshot {
    workers = List.copyOf(workers);
    pending = List.copyOf(pending);
    if (launchesInFlight < 0) {
      throw new IllegalArgumentException("launchesInFlight must be >= 0, got " + launchesInFlight);
    }
  }
}
