package dev.bulletin.runtime.workers;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.runtime.scheduler.WorkerSlots;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * A worker back after the runtime gave its calls up: its old runs' reports are refused, and it
 * takes no new call until each old run's end has come (or the wait is given up).
 */
class GivenUpCallsTest {
  final AttachedWorker worker = new AttachedWorker("w", "host", "", List.of("gpu0"), true, 0, "",
      new WorkerSlots("w", 1, true, 2, 1L << 30), AttachedWorkerTest.NO_LINK, "");
  final AtomicInteger passes = new AtomicInteger();

  @Test
  void oldRunsAreRefusedAndTheWorkerTakesCallsOnceTheirEndsCame() {
    GivenUpCalls givenUp = GivenUpCalls.watch(worker, List.of("a", "b"), passes::incrementAndGet);
    assertTrue(worker.drainReason().contains("2 calls the runtime gave up"), worker.drainReason());
    assertTrue(givenUp.refuses("a"));
    assertFalse(givenUp.refuses("c"), "a call the runtime still has there is not refused");
    assertFalse(givenUp.refusesEnd("c"));
    assertTrue(givenUp.refusesEnd("a"));
    assertTrue(worker.drainReason() != null, "b's old run has not ended yet");
    assertTrue(givenUp.refusesEnd("b"));
    assertNull(worker.drainReason());
    assertEquals(1, passes.get(), "a scheduling pass places on it again");
    // A new attempt of a placed there since is its own run: its reports and end count.
    assertFalse(givenUp.refuses("a"));
    assertFalse(givenUp.refusesEnd("a"));
  }

  @Test
  void aDrainOfItsPoolIsKept() {
    worker.drain("its pool replaces it");
    GivenUpCalls givenUp = GivenUpCalls.watch(worker, List.of("a"), passes::incrementAndGet);
    assertTrue(givenUp.refusesEnd("a"));
    assertEquals("its pool replaces it", worker.drainReason());
    assertEquals(0, passes.get());
  }

  @Test
  void endsThatNeverComeAreWaitedForOnlySoLong() {
    GivenUpCalls givenUp = GivenUpCalls.watch(worker, List.of("a"), passes::incrementAndGet);
    givenUp.stopWaiting();
    assertNull(worker.drainReason());
    assertFalse(givenUp.refusesEnd("a"), "from now on its reports are about its new run");
    assertEquals(1, passes.get());
  }

  @Test
  void nothingGivenUpChangesNothing() {
    GivenUpCalls.watch(worker, List.of(), passes::incrementAndGet).stopWaiting();
    assertNull(worker.drainReason());
    assertEquals(0, passes.get());
  }
}
