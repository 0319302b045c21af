package dev.bulletin.runtime.scheduler.plan;

/** Why a call waits, as a stable code; {@link WaitInfo#reason()} says it in words. */
public enum WaitCode {
  /** No worker has the GPUs, CPUs or memory free now. */
  CAPACITY,
  /** No worker that could take it stays up for its walltime. */
  WORKER_EXPIRY,
  /** No worker has joined (the pool). */
  NO_WORKERS,
  /** Its group holds its concurrent-GPU quota and may not borrow. */
  GROUP_QUOTA,
  /** Its group used its GPU-hours this period and may not borrow. */
  GROUP_GPU_HOURS,
  /** Over its group's quota: it may only borrow idle GPUs, and none fit. */
  NO_IDLE_CAPACITY,
  /** The user runs the QoS class's maximum of concurrent calls. */
  QOS_LIMIT,
  /** The user is at their own limit (GPUs or calls). */
  USER_LIMIT,
  /** Preemptible calls are being stopped to make room for it. */
  PREEMPTING,
  /**
   * GPUs that are free are reserved for older big calls (backfill), and it would run past the
   * reservation's start; a shorter walltime would let it use them.
   */
  RESERVED,
  /**
   * Values it reads are live on a GPU of one worker (not spilled), and that worker cannot take
   * it now (the GPU is taken, by its owner's own call in the executor that keeps them): it runs
   * there once it can. A worker the pools start would not help.
   */
  STATE_ON_GPU
}
