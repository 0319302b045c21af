package dev.bulletin.runtime.scheduler.impl;

import dev.bulletin.runtime.scheduler.plan.WaitCode;
import dev.bulletin.protocol.Text;
import dev.bulletin.runtime.scheduler.policy.GroupQuota;
import java.time.Duration;
import java.time.Instant;
import java.util.Locale;

/**
 * The group's hard quota. A call of a preemptible QoS is outside quotas (it only ever takes idle
 * GPUs and can be stopped). A call that would take its group over quota (concurrent GPUs or
 * GPU-hours this period) either waits, or, where the group may borrow, goes on marked
 * preemptible: it then only gets idle capacity, after every in-quota call had its turn, and can be
 * reclaimed.
 */
final class GroupQuotaCheck implements CallCheck {
  @Override
  public Verdict check(CallRow row, PassView pass) {
    row.preemptible = row.qos.preemptible();
    row.borrowReason = null;
    if (row.preemptible) {
      return Verdict.PASS;
    }
    GroupQuota quota = row.quota;
    String group = row.call.group();
    if (row.share > quota.maxGpus() && !quota.borrow()) {
      return Verdict.never("group " + group + "'s quota is " + quota.maxGpus() + " GPUs and it"
          + " may not borrow: a call for " + Text.number(row.share) + " GPUs can never run (ask"
          + " for fewer, or ask the group's lead to raise the quota)");
    }
    Counters counters = pass.counters();
    // A share of a GPU counts as its fraction: two 0.5 calls hold 1 GPU of the quota.
    double held = counters.groupQuotaGpus(row.group);
    Verdict over = null;
    if (row.share > 0 && held + row.share > quota.maxGpus()) {
      String holds = Text.number(held);
      over = pass.waitFor("group-gpus", row.group, row.units, (long) (held * 8), null,
          () -> Verdict.waitFor(WaitCode.GROUP_QUOTA, held >= quota.maxGpus()
              ? "group " + group + " quota reached: " + holds + "/" + quota.maxGpus() + " GPUs"
              : "group " + group + " quota: " + holds + "/" + quota.maxGpus() + " GPUs held, "
                  + Text.number(row.share) + " more would exceed it"));
    } else if (row.share > 0
        && counters.groupHoursThisPeriod(row.group) >= quota.gpuHoursPerPeriod()) {
      double used = counters.groupHoursThisPeriod(row.group);
      over = pass.waitFor("group-hours", row.group, 0, 0, null, () -> {
        Instant resets = pass.usage().group(group).periodEndsAt();
        return Verdict.waitFor(WaitCode.GROUP_GPU_HOURS, String.format(Locale.ROOT,
            "group %s used its GPU-hours for this period: %.0f/%.0f", group, used,
            quota.gpuHoursPerPeriod()) + (resets.equals(Instant.MAX) ? ""
                : " (resets in " + Text.duration(Duration.between(pass.now(), resets)) + ")"));
      });
    }
    if (over == null) {
      return Verdict.PASS;
    }
    if (!quota.borrow()) {
      return over;
    }
    row.preemptible = true;
    row.borrowReason = over.reason;
    return Verdict.PASS;
  }
}
