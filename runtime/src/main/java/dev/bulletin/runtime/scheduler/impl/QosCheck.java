package dev.bulletin.runtime.scheduler.impl;

import dev.bulletin.protocol.Text;
import java.time.Duration;

/** The call's QoS class exists and allows its walltime; otherwise it can never run as asked. */
final class QosCheck implements CallCheck {
  @Override
  public Verdict check(CallRow row, PassView pass) {
    if (row.qos == null) {
      return Verdict.never("unknown qos '" + row.call.qos() + "' (known: "
          + String.join(", ", pass.policy().qosNames()) + ")");
    }
    if (row.askedMillis > row.qos.maxWalltime().toMillis()) {
      Duration asked = row.call.walltime();
      String longer = pass.policy().qosNames().stream()
          .map(pass.policy().qos()::get)
          .filter(q -> !q.preemptible() && q.maxWalltime().compareTo(asked) >= 0)
          .map(q -> "; qos " + q.name() + " allows up to " + Text.duration(q.maxWalltime()))
          .findFirst().orElse("");
      return Verdict.never("walltime " + Text.duration(asked) + " is over qos "
          + row.qos.name() + "'s maximum of " + Text.duration(row.qos.maxWalltime()) + longer);
    }
    return Verdict.PASS;
  }
}
