package dev.bulletin.runtime.scheduler;

import static dev.bulletin.runtime.scheduler.Builders.NOW;
import static dev.bulletin.runtime.scheduler.Builders.aCall;
import static dev.bulletin.runtime.scheduler.Builders.aRunningCall;
import static dev.bulletin.runtime.scheduler.Builders.aSnapshot;
import static dev.bulletin.runtime.scheduler.Builders.aWorker;
import static dev.bulletin.runtime.scheduler.Builders.scheduler;
import static dev.bulletin.runtime.scheduler.Builders.secondsAgo;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.runtime.scheduler.plan.FilterReason;
import dev.bulletin.runtime.scheduler.plan.Placement;
import dev.bulletin.runtime.scheduler.plan.Plan;
import dev.bulletin.runtime.scheduler.plan.WaitCode;
import dev.bulletin.runtime.scheduler.plan.WaitInfo;
import java.time.Duration;
import java.util.Set;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/**
 * The backfill rule: the oldest big call that has waited too long reserves the worker where its
 * GPUs free soonest (by walltime); until the reservation starts only calls that end before it
 * use that worker's GPUs; the reserved call starts when they free, ahead of the queue order.
 */
class BackfillTest {
  /** Backfill is off unless the config has a scheduler.backfill section. */
  private static final String BACKFILL_ON = "scheduler: {backfill: {}}";

  /** An 8-GPU worker, half held by a batch call that ends within 50 minutes by its walltime. */
  private static Builders.SnapshotBuilder halfBusy() {
    return aSnapshot()
        .workers(aWorker().id("w1").gpus(8))
        .running(aRunningCall().id("held").on("w1", 0, 1, 2, 3)
            .startedAt(NOW.minus(Duration.ofMinutes(10))).walltime(Duration.ofHours(1)));
  }

  private static Set<String> placedIds(Plan plan) {
    return plan.placements().stream().map(Placement::callId).collect(Collectors.toSet());
  }

  private static WaitInfo waitOf(Plan plan, String id) {
    return plan.waitInfo(id).orElseThrow(() -> new AssertionError(id + " is not waiting: " + plan));
  }

  @Test
  void aShortCallThatEndsBeforeTheReservationUsesTheReservedGpus() {
    Plan plan = scheduler().plan(halfBusy().policy(BACKFILL_ON)
        .queue(aCall().id("big").qos("batch").gpus(8).submittedAt(secondsAgo(7200)),
            aCall().id("short").gpus(2).walltime(Duration.ofMinutes(30)))
        .build());
    assertEquals(Set.of("short"), placedIds(plan));
    WaitInfo big = waitOf(plan, "big");
    assertEquals(WaitCode.CAPACITY, big.code());
    assertTrue(big.reason().contains("8 GPUs on worker w1 are reserved for it (free in 50m at the latest"),
        big.reason());
    assertEquals(NOW.plus(Duration.ofMinutes(50)), big.eta().orElseThrow());
  }

  @Test
  void aLongCallDoesNotTakeReservedGpusAndIsToldWhy() {
    Plan plan = scheduler().plan(halfBusy().policy(BACKFILL_ON)
        .queue(aCall().id("big").qos("batch").gpus(8).submittedAt(secondsAgo(7200)),
            aCall().id("long").gpus(2).walltime(Duration.ofHours(2)))
        .build());
    assertEquals(Set.of(), placedIds(plan));
    WaitInfo long_ = waitOf(plan, "long");
    assertEquals(WaitCode.RESERVED, long_.code());
    assertTrue(long_.reason().contains("reserved for older calls of 8 GPUs or more (backfill)"),
        long_.reason());
    assertTrue(long_.suggestions().contains(
        "with a walltime of at most 50m it could use reserved GPUs now"), long_.suggestions()
        .toString());
    assertEquals(1, plan.stats().filtered(FilterReason.RESERVED));
  }

  @Test
  void withoutAReservationTheLongCallTakesTheGpusTheBigCallNeeds() {
    Plan plan = scheduler().plan(halfBusy()
        .policy("scheduler: {backfill: {max_reservations: 0}}")
        .queue(aCall().id("big").qos("batch").gpus(8).submittedAt(secondsAgo(7200)),
            aCall().id("long").gpus(2).walltime(Duration.ofHours(2)))
        .build());
    assertEquals(Set.of("long"), placedIds(plan));
  }

  @Test
  void aBigCallThatHasNotWaitedLongGetsNoReservation() {
    Plan plan = scheduler().plan(halfBusy().policy(BACKFILL_ON)
        .queue(aCall().id("big").qos("batch").gpus(8).submittedAt(secondsAgo(600)),
            aCall().id("long").gpus(2).walltime(Duration.ofHours(2)))
        .build());
    assertEquals(Set.of("long"), placedIds(plan));
  }

  @Test
  void theReservedCallStartsWhenTheGpusFreeAheadOfHigherPriorityCalls() {
    Plan plan = scheduler().plan(aSnapshot().policy(BACKFILL_ON)
        .workers(aWorker().id("w1").gpus(8))
        .queue(aCall().id("urgent").qos("interactive").gpus(2).submittedAt(secondsAgo(60)),
            aCall().id("big").qos("batch").gpus(8).submittedAt(secondsAgo(7200)))
        .build());
    assertEquals(Set.of("big"), placedIds(plan));
    assertEquals(WaitCode.CAPACITY, waitOf(plan, "urgent").code());
  }
}
