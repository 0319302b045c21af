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
  /** Backfill is on by default; an empty section says so explicitly. */
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
        .queue(aCall().id("big").qos("batch").gpus(8).submittedAt(secondsAgo(300)),
            aCall().id("long").gpus(2).walltime(Duration.ofHours(2)))
        .build());
    assertEquals(Set.of("long"), placedIds(plan));
  }

  @Test
  void byDefaultACallReservesWhenItNeedsAWholeWorkerOfTheLargestKind() {
    // No scheduler section at all: backfill is on, and "big" is a whole 8-GPU worker.
    Plan eight = scheduler().plan(halfBusy()
        .queue(aCall().id("big").qos("batch").gpus(8).submittedAt(secondsAgo(7200)),
            aCall().id("long").gpus(2).walltime(Duration.ofHours(2)))
        .build());
    assertEquals(Set.of(), placedIds(eight));
    assertEquals(WaitCode.RESERVED, waitOf(eight, "long").code());
    // Four GPUs on an 8-GPU worker are not a whole worker: no reservation, the long call runs.
    Plan four = scheduler().plan(aSnapshot().workers(aWorker().id("w1").gpus(8))
        .running(aRunningCall().id("held").on("w1", 0, 1, 2, 3, 4, 5)
            .startedAt(NOW.minus(Duration.ofMinutes(10))).walltime(Duration.ofHours(1)))
        .queue(aCall().id("big").qos("batch").gpus(4).submittedAt(secondsAgo(7200)),
            aCall().id("long").gpus(2).walltime(Duration.ofHours(2)))
        .build());
    assertEquals(Set.of("long"), placedIds(four));
    // On a lab of 4-GPU boxes, 4 GPUs are a whole worker: it reserves.
    Plan box = scheduler().plan(aSnapshot().workers(aWorker().id("b1").gpus(4))
        .running(aRunningCall().id("held").on("b1", 0, 1)
            .startedAt(NOW.minus(Duration.ofMinutes(10))).walltime(Duration.ofHours(1)))
        .queue(aCall().id("big").qos("batch").gpus(4).submittedAt(secondsAgo(7200)),
            aCall().id("long").gpus(2).walltime(Duration.ofHours(2)))
        .build());
    assertEquals(Set.of(), placedIds(box));
    assertEquals(WaitCode.RESERVED, waitOf(box, "long").code());
  }

  @Test
  void minGpusNamesWhatIsBig() {
    // A 7-GPU call on an 8-GPU worker: big for min_gpus 4, not a whole worker by default.
    Builders.SnapshotBuilder sevenWaits = aSnapshot().workers(aWorker().id("w1").gpus(8))
        .running(aRunningCall().id("held").on("w1", 0, 1, 2, 3, 4, 5)
            .startedAt(NOW.minus(Duration.ofMinutes(10))).walltime(Duration.ofHours(1)))
        .queue(aCall().id("big").qos("batch").gpus(7).submittedAt(secondsAgo(7200)),
            aCall().id("long").gpus(2).walltime(Duration.ofHours(2)));
    Plan four = scheduler().plan(sevenWaits.policy("scheduler: {backfill: {min_gpus: 4}}")
        .build());
    assertEquals(Set.of(), placedIds(four));
    assertEquals(WaitCode.RESERVED, waitOf(four, "long").code());
    Plan whole = scheduler().plan(sevenWaits
        .policy("scheduler: {backfill: {min_gpus: whole-worker}}").build());
    assertEquals(Set.of("long"), placedIds(whole));
  }

  @Test
  void aOneGpuCallNeverReservesByDefault() {
    // On one-GPU workers any GPU that frees fits it: no fragmentation to protect it from, so
    // its age gives it no precedence over fair share or credits.
    Plan plan = scheduler().plan(aSnapshot().workers(aWorker().id("w1").gpus(1))
        .running(aRunningCall().id("held").on("w1", 0)
            .startedAt(NOW.minus(Duration.ofMinutes(10))).walltime(Duration.ofHours(1)))
        .queue(aCall().id("old").qos("batch").gpus(1).submittedAt(secondsAgo(7200)))
        .build());
    assertEquals(WaitCode.CAPACITY, waitOf(plan, "old").code());
    assertTrue(!waitOf(plan, "old").reason().contains("reserved"), waitOf(plan, "old").reason());
  }


  /**
   * w1: one in-quota call on all 8 GPUs, free in 50 minutes by its walltime. w2: an in-quota
   * call on 4 GPUs, free in 30 minutes, and preemptible scavenger work on the other 4 with a
   * day of walltime left. Too few preemptible GPUs anywhere to reclaim room now.
   */
  private static Builders.SnapshotBuilder oneWorkerWithPreemptibleWork() {
    return aSnapshot()
        .workers(aWorker().id("w1").gpus(8), aWorker().id("w2").gpus(8))
        .running(aRunningCall().id("long").on("w1", 0, 1, 2, 3, 4, 5, 6, 7),
            aRunningCall().id("short").on("w2", 0, 1, 2, 3).walltime(Duration.ofMinutes(40)),
            aRunningCall().id("scavenging").qos("scavenger").preemptible(true)
                .on("w2", 4, 5, 6, 7).walltime(Duration.ofDays(1)))
        .queue(aCall().id("big").qos("batch").gpus(8).submittedAt(secondsAgo(7200)));
  }

  @Test
  void preemptibleWorkCountsAsFreeingItsGpusWhenTheReservedCallMayReclaimIt() {
    // By walltimes alone w2 frees in a day and w1 in 50 minutes; but the big call may stop the
    // scavenger work, so w2 is free once the in-quota call there ends, in 30 minutes.
    Plan plan = scheduler().plan(oneWorkerWithPreemptibleWork().policy(BACKFILL_ON).build());
    WaitInfo big = waitOf(plan, "big");
    assertEquals(WaitCode.CAPACITY, big.code());
    assertTrue(big.reason().contains("8 GPUs on worker w2 are reserved for it (free in 30m at"
        + " the latest, 4 of them by stopping preemptible work;"), big.reason());
    assertEquals(NOW.plus(Duration.ofMinutes(30)), big.eta().orElseThrow());
  }

  @Test
  void withPreemptionOffPreemptibleWorkCountsByItsWalltime() {
    Plan plan = scheduler().plan(oneWorkerWithPreemptibleWork()
        .policy("scheduler: {backfill: {}, max_preemptors_per_pass: 0}").build());
    WaitInfo big = waitOf(plan, "big");
    assertTrue(big.reason().contains("8 GPUs on worker w1 are reserved for it (free in 50m at"
        + " the latest;"), big.reason());
    assertEquals(NOW.plus(Duration.ofMinutes(50)), big.eta().orElseThrow());
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
