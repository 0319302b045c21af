package dev.bulletin.runtime.scheduler.impl;

import dev.bulletin.runtime.scheduler.plan.WaitCode;
import dev.bulletin.runtime.scheduler.policy.Durations;
import dev.bulletin.runtime.scheduler.policy.UserLimit;

/**
 * The user's limit profile (e.g. interns'): a call beyond it by itself never runs; a user at the
 * profile's concurrent GPUs or calls waits for one of their own calls to end.
 */
final class UserLimitCheck implements CallCheck {
  @Override
  public Verdict check(CallRow row, Pass pass) {
    UserLimit limit = row.limit;
    String user = row.call.user();
    String profile = " (limit profile " + limit.name() + ")";
    if (row.gpus > limit.maxGpus()) {
      return Verdict.never("user " + user + " may hold at most " + limit.maxGpus() + " GPU"
          + (limit.maxGpus() == 1 ? "" : "s") + profile + "; this call asks for " + row.gpus);
    }
    if (row.walltimeMillis > limit.maxWalltime().toMillis()) {
      return Verdict.never("walltime " + Durations.format(java.time.Duration.ofMillis(
          row.walltimeMillis)) + " is over user " + user + "'s maximum of "
          + Durations.format(limit.maxWalltime()) + profile + "; ask for a shorter walltime");
    }
    Counters counters = pass.counters;
    if (row.gpus > 0 && counters.userGpus[row.user] + row.gpus > limit.maxGpus()) {
      return Verdict.waitFor(WaitCode.USER_LIMIT, "user " + user + " holds "
          + counters.userGpus[row.user] + "/" + limit.maxGpus() + " GPUs" + profile);
    }
    if (counters.userCalls[row.user] >= limit.maxCalls()) {
      return Verdict.waitFor(WaitCode.USER_LIMIT, "user " + user + " runs "
          + counters.userCalls[row.user] + "/" + limit.maxCalls() + " calls" + profile);
    }
    return Verdict.PASS;
  }
}
