package dev.bulletin.runtime.scheduler.impl;

import dev.bulletin.runtime.scheduler.plan.WaitCode;

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
}
