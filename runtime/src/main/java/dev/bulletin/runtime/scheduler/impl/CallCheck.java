package dev.bulletin.runtime.scheduler.impl;

/**
 * A call-level stage: looks at the call and the pass's counters, never at single workers. It
 * answers PASS, WAIT (not now, with a named reason) or NEVER (with what to change).
 */
interface CallCheck {
  Verdict check(CallRow row, PassView pass);
}
