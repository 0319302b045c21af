package dev.bulletin.worker;

import dev.bulletin.bridge.ObjectKey;

/** How a call ended on the worker. */
public sealed interface CallOutcome {

  /**
   * The function returned ({@code raised == false}) or raised; the result object is retained.
   *
   * @param residentBytes what the call's executor keeps on its GPUs after it (issue 29): the
   *     scheduler steers other sessions' calls off those GPUs
   * @param leasedCalls when the call was a lease (issue 30), the calls it ran; else -1. The
   *     usage ledger counts those calls, not the lease
   * @param bytes the result's bytes where they came with the end (a remote worker's small
   *     result, just stored), else empty: the caller gets them without the store being read
   *     back (issue 30)
   */
  record Returned(ObjectKey result, long size, boolean raised, double runSeconds,
      long residentBytes, long leasedCalls, com.google.protobuf.ByteString bytes)
      implements CallOutcome {

    public Returned(ObjectKey result, long size, boolean raised, double runSeconds,
        long residentBytes, long leasedCalls) {
      this(result, size, raised, runSeconds, residentBytes, leasedCalls,
          com.google.protobuf.ByteString.EMPTY);
    }

    public Returned(ObjectKey result, long size, boolean raised, double runSeconds) {
      this(result, size, raised, runSeconds, 0, -1);
    }
  }

  /** The executor process died during the call; {@code cause} reads like "killed by SIGKILL". */
  record ExecutorDied(String cause) implements CallOutcome {}

  /** The call was stopped on request ({@link WorkerAgent#stop}); its executor was replaced. */
  record Stopped(String reason) implements CallOutcome {}

  /**
   * The worker running the call went away (its process or allocation ended, its connection
   * broke) or could not run it; {@code cause} says which. The call may run again elsewhere.
   */
  record WorkerLost(String cause) implements CallOutcome {}

  /**
   * The call never reached the worker: its connection was gone when the call was sent. It ran
   * nowhere, so it goes back to the queue without using a retry.
   */
  record Undelivered(String cause) implements CallOutcome {}
}
