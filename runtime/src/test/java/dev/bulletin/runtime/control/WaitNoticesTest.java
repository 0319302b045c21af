package dev.bulletin.runtime.control;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.runtime.scheduler.plan.WaitCode;
import dev.bulletin.runtime.scheduler.plan.WaitInfo;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/** When a waiting call hears about its wait again ({@link WaitNotices}). */
class WaitNoticesTest {

  private static final long SECOND = 1_000_000_000L;

  private static WaitInfo at(int position, WaitCode code, String reason) {
    return new WaitInfo(position, code, reason, Optional.empty(), List.of());
  }

  private static WaitInfo at(int position) {
    return at(position, WaitCode.CAPACITY, "every GPU is busy");
  }

  @Test
  void aFirstExplanationOrANewReasonIsToldAtOnce() {
    assertTrue(WaitNotices.due(null, at(40_000), 0));
    assertTrue(WaitNotices.due(at(40_000), at(40_000, WaitCode.GROUP_QUOTA, "every GPU is busy"), 0));
    assertTrue(WaitNotices.due(at(40_000), at(40_000, WaitCode.CAPACITY, "other words"), 0));
    assertFalse(WaitNotices.due(at(7), at(7), 10 * SECOND), "nothing changed");
  }

  @Test
  void aNewPositionNearTheHeadIsToldOnceASecond() {
    assertFalse(WaitNotices.due(at(900), at(850), SECOND - 1));
    assertTrue(WaitNotices.due(at(900), at(850), SECOND));
    assertTrue(WaitNotices.due(at(3), at(2), SECOND));
  }

  @Test
  void furtherBackANewPositionWaitsLongerAndOnceNearTheHeadIsToldAgain() {
    assertFalse(WaitNotices.due(at(50_000), at(45_000), 5 * SECOND), "a number a second is noise");
    assertTrue(WaitNotices.due(at(50_000), at(45_000), 45 * SECOND));
    assertFalse(WaitNotices.due(at(500_000), at(400_000), 59 * SECOND));
    assertTrue(WaitNotices.due(at(500_000), at(400_000), 60 * SECOND), "at most a minute");
    // The queue drained under it: the call nears the head, and hears so within a second.
    assertTrue(WaitNotices.due(at(50_000), at(600), SECOND));
  }
}
