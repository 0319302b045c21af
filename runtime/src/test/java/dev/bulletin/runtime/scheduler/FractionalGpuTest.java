package dev.bulletin.runtime.scheduler;

import static dev.bulletin.runtime.scheduler.Builders.GIB;
import static dev.bulletin.runtime.scheduler.Builders.NOW;
import static dev.bulletin.runtime.scheduler.Builders.aCall;
import static dev.bulletin.runtime.scheduler.Builders.aRunningCall;
import static dev.bulletin.runtime.scheduler.Builders.aSnapshot;
import static dev.bulletin.runtime.scheduler.Builders.aWorker;
import static dev.bulletin.runtime.scheduler.Builders.scheduler;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.runtime.scheduler.plan.Placement;
import dev.bulletin.runtime.scheduler.plan.Plan;
import dev.bulletin.runtime.scheduler.plan.Preemption;
import dev.bulletin.runtime.scheduler.plan.WaitCode;
import dev.bulletin.runtime.scheduler.plan.WaitInfo;
import dev.bulletin.runtime.scheduler.snapshot.QueuedCall;
import dev.bulletin.runtime.scheduler.snapshot.RunningCall;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/** Fractional GPUs (issue 16.6) through the whole scheduler: shares placed, packed and refused. */
class FractionalGpuTest {

  private static Plan plan(Builders.SnapshotBuilder snapshot) {
    return scheduler().plan(snapshot.build());
  }

  /** A queued call for a share of one GPU: {@code eighths} of 8. */
  private static QueuedCall.Builder aShare(String id, int eighths) {
    return aCall().id(id).gpus(0).gpuEighths(eighths);
  }

  /** Scavenger work holding {@code eighths} of GPU 0 of w1 (8: the GPU whole). */
  private static RunningCall.Builder scavenger(String id, int eighths) {
    return aRunningCall().id(id).qos("scavenger").preemptible(true).on("w1", 0)
        .gpuEighths(eighths % 8);
  }

  /** One GPU on w1 and no patience: an entitled call that finds no room reclaims at once. */
  private static Builders.SnapshotBuilder oneGpuReclaimingAtOnce() {
    return aSnapshot().policy("scheduler: {reclaim_patience: 0}")
        .workers(aWorker().id("w1").gpus(1));
  }

  private static Placement placed(Plan plan, String id) {
    return plan.placement(id).orElseThrow(() -> new AssertionError(id + " not placed: " + plan));
  }

  private static WaitInfo waitOf(Plan plan, String id) {
    return plan.waitInfo(id).orElseThrow(() -> new AssertionError(id + " is not waiting: " + plan));
  }

  @Test
  void twoHalvesShareOneGpu() {
    Plan plan = plan(aSnapshot().workers(aWorker().id("w1").gpus(2))
        .queue(aShare("a", 4), aShare("b", 4)));

    assertEquals(1, placed(plan, "a").gpuIds().size());
    assertEquals(placed(plan, "a").gpuIds(), placed(plan, "b").gpuIds(),
        "two halves go to the same GPU, the other stays free for a whole-GPU call");
  }

  @Test
  void aWholeGpuCallNeverLandsOnAPartlyUsedGpu() {
    Plan full = plan(aSnapshot().workers(aWorker().id("w1").gpus(1))
        .running(aRunningCall().id("half").on("w1", 0).gpuEighths(4))
        .queue(aCall().id("whole").qos("batch")));
    WaitInfo wait = waitOf(full, "whole");
    assertEquals(WaitCode.CAPACITY, wait.code());
    assertTrue(wait.reason().contains("no worker has 1 GPU free"), wait.reason());

    Plan roomy = plan(aSnapshot().workers(aWorker().id("w1").gpus(2))
        .running(aRunningCall().id("half").on("w1", 0).gpuEighths(4))
        .queue(aCall().id("whole").qos("batch")));
    assertEquals(List.of(1), placed(roomy, "whole").gpuIds());
  }

  @Test
  void aShareGoesToTheFullestSharedGpuThatFitsNotToAFreeOne() {
    // w1: GPU 0 has 6/8 free, GPU 1 has 4/8 free, GPU 2 is free; w2 is idle.
    Plan plan = plan(aSnapshot()
        .workers(aWorker().id("w1").gpus(3), aWorker().id("w2").gpus(8))
        .running(aRunningCall().id("q0").on("w1", 0).gpuEighths(2),
            aRunningCall().id("q1").on("w1", 1).gpuEighths(4))
        .queue(aShare("half", 4)));

    Placement half = placed(plan, "half");
    assertEquals("w1", half.workerId());
    assertEquals(List.of(1), half.gpuIds(), "best fit: the GPU the half fills exactly");
  }

  @Test
  void aShareOpensAFreeGpuOnlyWhenNoSharedOneHasRoom() {
    Plan plan = plan(aSnapshot()
        .workers(aWorker().id("w1").gpus(2))
        .running(aRunningCall().id("big").on("w1", 0).gpuEighths(6))
        .queue(aShare("half", 4)));

    assertEquals(List.of(1), placed(plan, "half").gpuIds());
  }

  @Test
  void nineEighthCallsOnOneGpuEightRunOneWaits() {
    List<QueuedCall.Builder> calls = new ArrayList<>();
    for (int i = 0; i < 9; i++) {
      calls.add(aShare("e" + i, 1).qos("batch").submittedAt(Builders.secondsAgo(60 - i)));
    }
    Plan plan = plan(aSnapshot().workers(aWorker().id("w1").gpus(1))
        .queue(calls.toArray(QueuedCall.Builder[]::new)));

    assertEquals(8, plan.placements().size());
    assertTrue(plan.placements().stream().allMatch(p -> p.gpuIds().equals(List.of(0))));
    WaitInfo last = waitOf(plan, "e8");
    assertEquals(WaitCode.CAPACITY, last.code());
    assertTrue(last.reason().contains("no GPU has 0.125 of a GPU free"), last.reason());
  }

  @Test
  void theGroupQuotaChargesTheFraction() {
    Plan plan = plan(aSnapshot()
        .policy("""
            groups:
              nlp: {gpus: 1, borrow: false}
            """)
        .workers(aWorker().id("w1").gpus(4))
        .running(aRunningCall().id("held").user("ann").group("nlp").qos("interactive")
            .on("w1", 0).gpuEighths(4))
        .queue(aShare("second-half", 4).submittedAt(Builders.secondsAgo(30)),
            aShare("one-too-many", 1).submittedAt(Builders.secondsAgo(20))));

    placed(plan, "second-half");
    WaitInfo over = waitOf(plan, "one-too-many");
    assertEquals(WaitCode.GROUP_QUOTA, over.code());
    assertEquals("group nlp quota reached: 1/1 GPUs", over.reason());
  }

  @Test
  void fractionsDoNotGetAUserPastTheirGpuLimit() {
    Plan plan = plan(aSnapshot()
        .policy("""
            limits:
              intern: {gpus: 1, users: [carl]}
            """)
        .workers(aWorker().id("w1").gpus(8))
        .queue(aShare("c1", 6).user("carl").qos("batch").submittedAt(Builders.secondsAgo(30)),
            aShare("c2", 2).user("carl").qos("batch").submittedAt(Builders.secondsAgo(20)),
            aShare("c3", 1).user("carl").qos("batch").submittedAt(Builders.secondsAgo(10))));

    assertEquals(Set.of("c1", "c2"), plan.placements().stream().map(Placement::callId)
        .collect(Collectors.toSet()));
    WaitInfo wait = waitOf(plan, "c3");
    assertEquals(WaitCode.USER_LIMIT, wait.code());
    assertEquals("user carl holds 1/1 GPUs (limit profile intern)", wait.reason());
  }

  @Test
  void aShareNeverLandsOnAGpuAnotherUserHoldsWhole() {
    Plan plan = plan(aSnapshot().workers(aWorker().id("w1").gpus(1))
        .running(aRunningCall().id("bobs").user("bob").on("w1", 0))
        .queue(aShare("anns", 1)));

    assertTrue(plan.placements().isEmpty(), plan.toString());
    assertEquals(WaitCode.CAPACITY, waitOf(plan, "anns").code());
  }

  @Test
  void anInteractiveCallPreemptsFractionalScavengerWork() {
    Plan plan = plan(oneGpuReclaimingAtOnce()
        .running(scavenger("s1", 4), scavenger("s2", 2))
        .queue(aCall().id("interactive").qos("interactive")));

    assertEquals(Set.of("s1", "s2"), plan.preemptions().stream().map(Preemption::victimId)
        .collect(Collectors.toSet()), "a whole GPU frees only with every sharer gone");
    assertEquals(WaitCode.PREEMPTING, waitOf(plan, "interactive").code());
  }

  @Test
  void aFractionalInteractiveCallPreemptsOnlyWhatItNeeds() {
    Plan plan = plan(oneGpuReclaimingAtOnce()
        .running(scavenger("s1", 4),
            scavenger("s2", 4).savedAt(NOW.minus(java.time.Duration.ofMinutes(1))))
        .queue(aShare("quarter", 2).qos("interactive")));

    assertEquals(List.of("s2"), plan.preemptions().stream().map(Preemption::victimId).toList(),
        "one half frees room for a quarter; the one with less unsaved work goes");
  }

  @Test
  void theRoomAStoppedShareLeavesIsKeptForTheCallItWasStoppedFor() {
    // s1 has stopped and is queued again; s2 is still stopping for the interactive call: the
    // half s1 left must not take s1 back (it would be preempted again, and again).
    Plan plan = plan(oneGpuReclaimingAtOnce()
        .running(scavenger("s2", 4).preemptedFor("interactive"))
        .queue(aShare("s1", 4).qos("scavenger"), aCall().id("interactive").qos("interactive")));

    assertTrue(plan.placements().isEmpty(), plan.toString());
    assertTrue(plan.preemptions().isEmpty(), plan.toString());
    assertEquals(WaitCode.PREEMPTING, waitOf(plan, "interactive").code());
    assertEquals(WaitCode.CAPACITY, waitOf(plan, "s1").code());
  }

  @Test
  void aFractionalCallPreemptsAWholeScavengerGpu() {
    Plan plan = plan(oneGpuReclaimingAtOnce()
        .running(scavenger("s", 8))
        .queue(aShare("half", 4).qos("interactive")));

    assertEquals(List.of("s"), plan.preemptions().stream().map(Preemption::victimId).toList());
  }

  @Test
  void fractionsThatAreNotEighthsOrAboveOneAreRefusedWithWhatToAsk() {
    IllegalArgumentException third = assertThrows(IllegalArgumentException.class,
        () -> Demand.ofGpus(0.3, 1, 0));
    assertTrue(third.getMessage().contains("gpus=0.3 is refused: a share of a GPU is a multiple"
        + " of 1/8"), third.getMessage());
    IllegalArgumentException oneAndHalf = assertThrows(IllegalArgumentException.class,
        () -> Demand.ofGpus(1.5, 1, 0));
    assertTrue(oneAndHalf.getMessage().contains("fractions are for less than one GPU"),
        oneAndHalf.getMessage());
    assertEquals(new Demand(0, 1, 0, 4), Demand.ofGpus(0.5, 1, 0));
    assertEquals(new Demand(2, 1, 0), Demand.ofGpus(2, 1, 0));
    assertEquals(0.125, Demand.ofGpus(0.125, 1, 0).gpuShare());
  }

  @Test
  void aShareOnAClusterWithoutGpusIsInfeasibleAsAWholeGpuIs() {
    Feasibility never = scheduler().feasible(Demand.ofGpus(0.5, 1, 0),
        ClusterCapacity.of(List.of(new WorkerCapacity(0, false, 4, GIB))));
    Feasibility.Infeasible infeasible = assertInstanceOf(Feasibility.Infeasible.class, never);
    assertTrue(infeasible.reason().contains("asks for 0.5 GPUs"), infeasible.reason());

    Plan plan = plan(aSnapshot().workers(aWorker().id("cpu").gpus(0)).queue(aShare("half", 4)));
    assertTrue(plan.rejection("half").isPresent(), plan.toString());
  }
}
