package dev.bulletin.runtime.scheduler.impl;

import dev.bulletin.runtime.scheduler.plan.WaitCode;
import dev.bulletin.runtime.scheduler.policy.QosClass;

/** The QoS class's concurrent calls per user: at the cap, the user's next call waits. */
final class QosLimitCheck implements CallCheck {
  @Override
  public Verdict check(CallRow row, PassView pass) {
    int max = row.qos.maxCallsPerUser();
    if (max == QosClass.UNLIMITED) {
      return Verdict.PASS;
    }
    int running = pass.counters().userQosCalls(row.user, row.qosId);
    if (running >= max) {
      return pass.waitFor("qos", row.user, row.qosId, running, null,
          () -> Verdict.waitFor(WaitCode.QOS_LIMIT, "qos " + row.qos.name() + ": " + running
              + "/" + max + " concurrent calls for user " + row.call.user()));
    }
    return Verdict.PASS;
  }
}
