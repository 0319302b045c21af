package dev.bulletin.runtime.control;

import dev.bulletin.runtime.scheduler.plan.WaitInfo;

/**
 * When a waiting call is told why it waits again. A new reason (code or words) is told at once;
 * a new position alone at most once a second near the head of the queue, and more rarely the
 * further back the call waits: once every {@link #POSITIONS_PER_SECOND} positions' worth of
 * seconds, at most once a minute. A caller learns little from a new number every second at
 * position 50,000, and with 100,000 calls queued over 2,000 users the positions told each
 * second outnumbered the calls that ended (make bench-scale, 1,000 simulated workers: 1.8
 * position updates per call run, close to half of every event the runtime sent).
 */
final class WaitNotices {

  /** Positions up to this far back hear each change once a second, as before. */
  static final int POSITIONS_PER_SECOND = 1_000;
  private static final long SECOND_NANOS = 1_000_000_000L;
  private static final long MAX_GAP_NANOS = 60 * SECOND_NANOS;

  private WaitNotices() {}

  /**
   * Whether {@code info} is worth telling a call last told {@code told} (null: never)
   * {@code sinceNanos} ago.
   */
  static boolean due(WaitInfo told, WaitInfo info, long sinceNanos) {
    if (told == null || told.code() != info.code() || !told.reason().equals(info.reason())) {
      return true;
    }
    if (told.position() == info.position()) {
      return false;
    }
    long gap = Math.min(MAX_GAP_NANOS,
        SECOND_NANOS * Math.max(1, Math.min(told.position(), info.position())
            / POSITIONS_PER_SECOND));
    return sinceNanos >= gap;
  }
}
