package dev.bulletin.runtime.scheduler.impl;

import dev.bulletin.runtime.scheduler.plan.WaitCode;

/** A call-level stage's answer: go on, wait (not now, with a reason), or never. */
final class Verdict {
  enum Kind { PASS, WAIT, NEVER }

  static final Verdict PASS = new Verdict(Kind.PASS, null, null);

  final Kind kind;
  final WaitCode code;
  final String reason;

  private Verdict(Kind kind, WaitCode code, String reason) {
    this.kind = kind;
    this.code = code;
    this.reason = reason;
  }

  static Verdict waitFor(WaitCode code, String reason) {
    return new Verdict(Kind.WAIT, code, reason);
  }

  static Verdict never(String reason) {
    return new Verdict(Kind.NEVER, null, reason);
  }
}
