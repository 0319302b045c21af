package dev.bulletin.runtime.task;

/**
 * What one call used, summed over its attempts (a requeued call adds up): for the usage ledger.
 * Owned by the control plane's event loop, like its {@link Task}.
 */
public final class CallUsage {
  private long reservedSinceNanos;
  private long runningSinceNanos;
  private double reservedSeconds;
  private double runningSeconds;
  private double gpuSecondsReserved;
  private double gpuSecondsBusy;
  private double creditsSpent;
  private String worker = "";
  private int attempts;
  private long leasedCalls = -1;

  /** Slots reserved for it on a worker (placed). */
  public void reserved(String workerId, long nanos) {
    worker = workerId;
    reservedSinceNanos = nanos;
    attempts++;
  }

  /** Its executor started it. */
  public void running(long nanos) {
    runningSinceNanos = nanos;
  }

  /** Its slots went back: the attempt's reserved and running time add up. */
  public void released(double gpus, double busyGpuSeconds, long nanos) {
    if (reservedSinceNanos != 0) {
      double reserved = Math.max(0, nanos - reservedSinceNanos) / 1e9;
      reservedSeconds += reserved;
      gpuSecondsReserved += gpus * reserved;
    }
    if (runningSinceNanos != 0) {
      runningSeconds += Math.max(0, nanos - runningSinceNanos) / 1e9;
    }
    // Busy cannot exceed what was held (samples straddle the attempt's edges).
    gpuSecondsBusy = Math.min(gpuSecondsReserved, gpuSecondsBusy + Math.max(0, busyGpuSeconds));
    reservedSinceNanos = 0;
    runningSinceNanos = 0;
  }

  /** It was a lease (issue 30) and ran {@code calls} calls for its client. */
  public void leased(long calls) {
    leasedCalls = Math.max(0, calls);
  }

  /** Its group paid credits for its place in the queue. */
  public void spent(double credits) {
    creditsSpent += credits;
  }

  public double reservedSeconds() { return reservedSeconds; }
  public double runningSeconds() { return runningSeconds; }
  public double gpuSecondsReserved() { return gpuSecondsReserved; }
  public double gpuSecondsBusy() { return gpuSecondsBusy; }
  public double creditsSpent() { return creditsSpent; }
  /** The worker of its last placement, or empty if it never had one. */
  public String worker() { return worker; }
  /** How many times it was placed. */
  public int attempts() { return attempts; }
  /** The user's calls it stands for: 1, or the calls it ran as a lease. */
  public long calls() { return leasedCalls >= 0 ? leasedCalls : 1; }
  /** Whether it was a lease that said how many calls it ran. */
  public boolean wasLease() { return leasedCalls >= 0; }
}
