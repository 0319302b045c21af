package dev.bulletin.runtime.scheduler.impl;

import dev.bulletin.runtime.scheduler.plan.WaitCode;
import dev.bulletin.runtime.scheduler.policy.PolicyConfig;

/**
 * Preemptible work (borrowed over quota, or a preemptible QoS) runs only on lendable capacity:
 * GPUs no group's quota covers, plus up to each group's {@code lend} of its idle quota. With the
 * default (a group lends its whole idle quota) this never refuses a call that fits; a group that
 * lends less keeps GPUs free for its own next calls, which then need not preempt anyone.
 */
final class LendingCheck implements CallCheck {
  @Override
  public Verdict check(CallRow row, PassView pass) {
    if (!row.preemptible || !pass.lending()) {
      return Verdict.PASS;
    }
    double lent = pass.lentGpus();
    double lendable = pass.lendableGpus();
    if (row.share > 0 && lent + row.share > lendable) {
      String prefix = row.borrowReason != null ? row.borrowReason + "; over quota it runs only"
          + " on lent GPUs, and " : "";
      return pass.waitFor("lending", (long) (lent * 8), (long) (lendable * 8), row.units, prefix,
          () -> Verdict.waitFor(WaitCode.NO_IDLE_CAPACITY, prefix + dev.bulletin.protocol.Text
              .number(lent) + "/" + dev.bulletin.protocol.Text.number(lendable)
              + " lendable GPUs are lent out (groups keep part of their idle quota for their own"
              + " calls)"));
    }
    return Verdict.PASS;
  }

  /**
   * Capacity no quota covers, plus each group's idle quota up to its {@code lend}; computed once
   * the in-quota calls of the pass are placed (preemptible placements do not change it).
   */
  static double lendableGpus(PolicyConfig policy, Counters counters, Names groups,
      ClusterIndex index) {
    long capacity = 0;
    for (int w = 0; w < index.size; w++) {
      if (index.usable[w]) {
        capacity += index.gpuCount[w];
      }
    }
    long quotas = 0;
    double lendable = 0;
    for (var quota : policy.groups().values()) {
      if (!quota.limitsGpus()) {
        return Integer.MAX_VALUE;
      }
      int id = groups.find(quota.name());
      double held = id < 0 ? 0 : counters.groupQuotaGpus(id);
      quotas += quota.maxGpus();
      lendable += Math.min(quota.lend(), Math.max(0, quota.maxGpus() - held));
    }
    return Math.min(Integer.MAX_VALUE, Math.max(0, capacity - quotas) + lendable);
  }
}
