package dev.bulletin.runtime.scheduler.policy;

import java.time.Duration;

/**
 * How a group earns credits by staying under its quota. The rule: for every hour, a group earns
 * {@code perIdleGpuHour} credits for each GPU of its concurrent quota it did not hold (its
 * non-preemptible calls' average GPUs over the hour), capped at {@code maxBalance}. A group
 * without a GPU quota earns nothing: it has no quota to stay under. Spending: a call that
 * offers {@code c} credits is ordered ahead of every call of its QoS that offers fewer; the group
 * pays {@code c} when the call is placed (not while it waits), and the offer is honoured only
 * while the group's balance covers it.
 */
public record CreditRule(double perIdleGpuHour, double maxBalance) {

  public CreditRule {
    if (!(perIdleGpuHour >= 0) || Double.isInfinite(perIdleGpuHour)) {
      throw new IllegalArgumentException("scheduler.credits.per_idle_gpu_hour must be >= 0, got "
          + perIdleGpuHour);
    }
    if (!(maxBalance >= 0)) {
      throw new IllegalArgumentException("scheduler.credits.max_balance must be >= 0, got "
          + maxBalance);
    }
  }

  public static CreditRule defaults() {
    return new CreditRule(0.1, 500);
  }

  /** The balance after {@code elapsed} in which the group held {@code averageGpusHeld}. */
  public double earn(GroupQuota quota, double balance, double averageGpusHeld, Duration elapsed) {
    if (!quota.limitsGpus()) {
      return balance;
    }
    double idle = Math.max(0, quota.maxGpus() - averageGpusHeld);
    double hours = elapsed.toMillis() / 3_600_000.0;
    return Math.min(maxBalance, balance + perIdleGpuHour * idle * hours);
  }
}
