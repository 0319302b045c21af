package dev.bulletin.runtime.scheduler.impl;

import dev.bulletin.runtime.scheduler.plan.FilterReason;

/**
 * A worker-level stage: can this worker take this call now? Draining and free GPU count are
 * already answered by the {@link ClusterIndex} buckets the candidates come from; filters check
 * what buckets cannot. Each reads the call, the worker's entries in the index and the clock, and
 * names what it turns a worker down for.
 */
enum WorkerFilter {
  /** The worker stays up for the call's walltime (a Slurm-provided worker has an end). */
  STAYS_UP(FilterReason.WORKER_EXPIRY) {
    @Override
    boolean accepts(CallRow row, int w, ClusterIndex index, long nowMillis) {
      return index.expiresMillis[w] == Long.MAX_VALUE
          || nowMillis + row.walltimeMillis <= index.expiresMillis[w];
    }
  },
  CPUS(FilterReason.CPUS) {
    @Override
    boolean accepts(CallRow row, int w, ClusterIndex index, long nowMillis) {
      return index.freeCpus[w] >= row.cpus - 1e-9;
    }
  },
  MEMORY(FilterReason.MEMORY) {
    @Override
    boolean accepts(CallRow row, int w, ClusterIndex index, long nowMillis) {
      return index.freeMemory[w] >= row.memory;
    }
  },
  /** A worker reserved for an older big call takes only calls that end before it starts. */
  BACKFILL(FilterReason.RESERVED) {
    @Override
    boolean accepts(CallRow row, int w, ClusterIndex index, long nowMillis) {
      return index.reservations.admits(row, w, nowMillis);
    }
  };

  /** What a worker this filter turns down is counted under. */
  final FilterReason reason;

  WorkerFilter(FilterReason reason) {
    this.reason = reason;
  }

  abstract boolean accepts(CallRow row, int worker, ClusterIndex index, long nowMillis);
}
