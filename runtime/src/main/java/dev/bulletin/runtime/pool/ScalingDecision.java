package dev.bulletin.runtime.pool;

import java.time.Instant;

/** One thing the policy wants done, always with the reason a sysadmin reads in the log. */
public sealed interface ScalingDecision {

  /** The metric tag and log word: launch, terminate, replace. */
  String kind();

  String reason();

  /** Start {@code count} new workers. */
  record Launch(int count, String reason) implements ScalingDecision {
    public Launch {
      if (count < 1) {
        throw new IllegalArgumentException("a launch needs count >= 1, got " + count);
      }
    }

    @Override
    public String kind() {
      return "launch";
    }
  }

  /** Stop this worker now (it runs no call, or never registered). */
  record Terminate(String workerId, String reason) implements ScalingDecision {
    @Override
    public String kind() {
      return "terminate";
    }
  }

  /**
   * This worker's allocation ends soon: drain it (no new calls; the running ones finish) and stop
   * it once idle. Its successor, when the pool still needs one, is in the same round's Launch.
   */
  record Replace(String workerId, Instant expiresAt, String reason) implements ScalingDecision {
    @Override
    public String kind() {
      return "replace";
    }
  }
}
