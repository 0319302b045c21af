package dev.bulletin.runtime.scheduler.impl;

/**
 * A worker-level stage: can this worker take this call now? Pool, draining and free GPU count
 * are already answered by the {@link ClusterIndex} buckets the candidates come from; filters
 * check what buckets cannot.
 */
interface WorkerFilter {
  boolean accepts(CallRow row, int worker, Pass pass);

  /** The worker stays up for the call's walltime (a Slurm-provided worker has an end). */
  WorkerFilter STAYS_UP = (row, w, pass) ->
      pass.index.expiresMillis[w] == Long.MAX_VALUE
          || pass.nowMillis + row.walltimeMillis <= pass.index.expiresMillis[w];

  WorkerFilter CPUS = (row, w, pass) -> pass.index.freeCpus[w] >= row.cpus - 1e-9;

  WorkerFilter MEMORY = (row, w, pass) -> pass.index.freeMemory[w] >= row.memory;
}
