package dev.bulletin.runtime.scheduler.policy;

import java.time.Duration;

/**
 * A group's hard quota.
 *
 * @param maxGpus GPUs its non-preemptible calls may hold at once
 * @param gpuHoursPerPeriod GPU-hours it may use per period (the ledger resets each period)
 * @param borrow whether work over quota may run anyway as preemptible on idle capacity
 * @param weight its share for fair share between groups (usage is divided by it)
 * @param lend how many of its idle quota GPUs others may borrow (like Kueue's lendingLimit);
 *     the rest stay free for its own next calls, so a burst of its notebook calls need not
 *     preempt anyone. Defaults to the whole quota.
 */
public record GroupQuota(
    String name, int maxGpus, double gpuHoursPerPeriod, Duration period, boolean borrow,
    double weight, int lend) {

  public static final int UNLIMITED_GPUS = Integer.MAX_VALUE;

  public GroupQuota {
    if (name == null || name.isBlank()) {
      throw new IllegalArgumentException("group name is required");
    }
    if (maxGpus < 0) {
      throw new IllegalArgumentException("groups." + name + ".gpus must be >= 0, got " + maxGpus);
    }
    if (!(gpuHoursPerPeriod >= 0)) {
      throw new IllegalArgumentException("groups." + name + ".gpu_hours must be >= 0, got "
          + gpuHoursPerPeriod);
    }
    if (period == null || period.isZero() || period.isNegative()) {
      throw new IllegalArgumentException("groups." + name + ".period must be > 0");
    }
    if (lend < 0) {
      throw new IllegalArgumentException("groups." + name + ".lend must be >= 0, got " + lend);
    }
    if (!(weight > 0) || Double.isInfinite(weight)) {
      throw new IllegalArgumentException("groups." + name + ".weight must be > 0, got " + weight);
    }
  }

  /** A group not named in the config: no quota, may not earn credits. */
  public static GroupQuota unlimited(String name) {
    // Asked for every call of every scheduling pass: one immutable instance per group name
    // (names come from the config and the users' groups, a bounded set).
    return UNLIMITED.computeIfAbsent(name, n -> new GroupQuota(n, UNLIMITED_GPUS,
        Double.POSITIVE_INFINITY, Duration.ofDays(7), true, 1, UNLIMITED_GPUS));
  }

  private static final java.util.concurrent.ConcurrentMap<String, GroupQuota> UNLIMITED =
      new java.util.concurrent.ConcurrentHashMap<>();

  public boolean limitsGpus() {
    return maxGpus != UNLIMITED_GPUS;
  }
}
