package dev.bulletin.runtime.scheduler.plan;

/**
 * Why a worker filter turned a worker down for a call, named and counted per pass (like Nomad's
 * {@code FilterConstraint...} reasons; {@link PassStats#filtered}). Free GPUs and draining are
 * not among them: candidates come from index buckets that hold only usable workers with enough
 * GPUs free.
 */
public enum FilterReason {
  /** The worker's allocation ends before the call's walltime would (a Slurm-provided worker). */
  WORKER_EXPIRY,
  /** Too few CPUs free. */
  CPUS,
  /** Too little memory free. */
  MEMORY,
  /**
   * The worker's GPUs are reserved for an older big call (backfill) and this call would still
   * run when the reservation starts.
   */
  RESERVED
}
