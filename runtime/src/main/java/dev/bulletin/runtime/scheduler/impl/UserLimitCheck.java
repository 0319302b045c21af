package dev.bulletin.runtime.scheduler.impl;

import dev.bulletin.runtime.scheduler.plan.WaitCode;
import dev.bulletin.protocol.Text;
import dev.bulletin.runtime.scheduler.policy.UserLimit;

/**
 * The user's limit profile (e.g. interns'): a call beyond it by itself never runs; a user at the
 * profile's concurrent GPUs or calls waits for one of their own calls to end.
 */
final class UserLimitCheck implements CallCheck {
  @Override
  public Verdict check(CallRow row, PassView pass) {
    UserLimit limit = row.limit;
    String user = row.call.user();
    if (row.share > limit.maxGpus()) {
      return Verdict.never("user " + user + " may hold at most " + Text.count(limit.maxGpus(), "GPU")
          + profile(limit) + "; this call asks for " + Text.number(row.share));
    }
    if (row.walltimeMillis > limit.maxWalltime().toMillis()) {
      return Verdict.never("walltime " + Text.duration(java.time.Duration.ofMillis(
          row.walltimeMillis)) + " is over user " + user + "'s maximum of "
          + Text.duration(limit.maxWalltime()) + profile(limit) + "; ask for a shorter walltime");
    }
    Counters counters = pass.counters();
    // A share of a GPU counts as its fraction of the user's GPUs.
    double gpus = counters.userGpus(row.user);
    if (row.share > 0 && gpus + row.share > limit.maxGpus()) {
      return pass.waitFor("user-gpus", row.user, (long) (gpus * 8), 0, null,
          () -> Verdict.waitFor(WaitCode.USER_LIMIT, "user " + user + " holds "
              + Text.number(gpus) + "/"
              + limit.maxGpus() + " GPUs" + profile(limit)));
    }
    int calls = counters.userCalls(row.user);
    if (calls >= limit.maxCalls()) {
      return pass.waitFor("user-calls", row.user, calls, 0, null,
          () -> Verdict.waitFor(WaitCode.USER_LIMIT, "user " + user + " runs " + calls + "/"
              + limit.maxCalls() + " calls" + profile(limit)));
    }
    return Verdict.PASS;
  }

  private static String profile(UserLimit limit) {
    return " (limit profile " + limit.name() + ")";
  }
}
