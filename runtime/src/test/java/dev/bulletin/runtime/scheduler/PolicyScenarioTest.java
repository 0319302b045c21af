package dev.bulletin.runtime.scheduler;

import static dev.bulletin.runtime.scheduler.Builders.secondsAgo;
import static dev.bulletin.runtime.scheduler.Builders.NOW;
import static dev.bulletin.runtime.scheduler.Builders.aCall;
import static dev.bulletin.runtime.scheduler.Builders.aRunningCall;
import static dev.bulletin.runtime.scheduler.Builders.aSnapshot;
import static dev.bulletin.runtime.scheduler.Builders.aWorker;
import static dev.bulletin.runtime.scheduler.Builders.scheduler;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.runtime.scheduler.plan.Placement;
import dev.bulletin.runtime.scheduler.plan.Plan;
import dev.bulletin.runtime.scheduler.plan.Preemption;
import dev.bulletin.runtime.scheduler.plan.WaitCode;
import dev.bulletin.runtime.scheduler.plan.WaitInfo;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/** One scenario per policy sentence of issue 4, through the whole scheduler. */
class PolicyScenarioTest {

  private static Plan plan(Builders.SnapshotBuilder snapshot) {
    return scheduler().plan(snapshot.build());
  }

  private static Set<String> placedIds(Plan plan) {
    return plan.placements().stream().map(Placement::callId).collect(Collectors.toSet());
  }

  private static WaitInfo waitOf(Plan plan, String id) {
    return plan.waitInfo(id).orElseThrow(() -> new AssertionError(id + " is not waiting: " + plan));
  }

  @Test
  void internsHaveTheTighterLimitTheirHostSetAndOthersDoNot() {
    Plan plan = plan(aSnapshot()
        .policy("""
            limits:
              intern: {gpus: 1, calls: 2, users: [carl]}
            """)
        .workers(aWorker().gpus(8))
        .queue(aCall().id("carl-big").user("carl").gpus(2),
            aCall().id("carl-1").user("carl").submittedAt(secondsAgo(30)),
            aCall().id("carl-2").user("carl").submittedAt(secondsAgo(20)),
            aCall().id("ann-1").user("ann").gpus(2), aCall().id("ann-2").user("ann").gpus(2)));

    assertTrue(plan.rejection("carl-big").orElseThrow().reason()
        .contains("user carl may hold at most 1 GPU (limit profile intern)"));
    assertEquals(Set.of("carl-1", "ann-1", "ann-2"), placedIds(plan));
    WaitInfo carl = waitOf(plan, "carl-2");
    assertEquals(WaitCode.USER_LIMIT, carl.code());
    assertEquals("user carl holds 1/1 GPUs (limit profile intern)", carl.reason());
  }

  @Test
  void creditsBuyPriorityForOneUrgentCallAndArePaidWhenItIsPlaced() {
    Builders.SnapshotBuilder snapshot = aSnapshot()
        .workers(aWorker().gpus(1))
        .queue(aCall().id("early").user("ann").group("nlp").submittedAt(secondsAgo(600)),
            aCall().id("urgent").user("dan").group("vision").creditsSpent(5)
                .submittedAt(secondsAgo(5)));
    Plan rich = plan(snapshot.groupUsage("vision", 0, 0, 12));
    assertEquals(List.of("urgent"), List.copyOf(placedIds(rich)));
    assertEquals(5.0, rich.placement("urgent").orElseThrow().creditsCharged());
    assertEquals(1, waitOf(rich, "early").position());

    Plan poor = plan(snapshot.groupUsage("vision", 0, 0, 2));
    assertEquals(List.of("early"), List.copyOf(placedIds(poor)));
    assertTrue(waitOf(poor, "urgent").suggestions().stream()
        .anyMatch(s -> s.contains("offers 5 credits but group vision has 2")));
  }

  @Test
  void overQuotaWorkBorrowsIdleGpusAsPreemptibleAfterInQuotaWork() {
    Plan plan = plan(aSnapshot()
        .policy("""
            groups:
              nlp: {gpus: 2}
              vision: {gpus: 4}
            """)
        .workers(aWorker().gpus(4))
        .queue(aCall().id("nlp-1").group("nlp").gpus(2).submittedAt(secondsAgo(90)),
            aCall().id("nlp-2").group("nlp").gpus(1).submittedAt(secondsAgo(80)),
            aCall().id("vision-1").user("vic").group("vision").qos("batch")
                .submittedAt(secondsAgo(10)),
            aCall().id("nlp-3").group("nlp").gpus(2).submittedAt(secondsAgo(5))));

    assertEquals(Set.of("nlp-1", "nlp-2", "vision-1"), placedIds(plan));
    assertFalse(plan.placement("nlp-1").orElseThrow().preemptible());
    assertTrue(plan.placement("nlp-2").orElseThrow().preemptible(), "over quota: borrowed");
    WaitInfo nlp3 = waitOf(plan, "nlp-3");
    assertEquals(WaitCode.NO_IDLE_CAPACITY, nlp3.code());
    assertTrue(nlp3.reason().startsWith("group nlp quota reached: 2/2 GPUs; over quota it runs"
        + " only as preemptible on idle GPUs, and no worker has 2 GPUs free"), nlp3.reason());
  }

  @Test
  void aGroupThatMayNotBorrowWaitsAtItsQuotaWithTheNamedReason() {
    Plan plan = plan(aSnapshot()
        .policy("groups: {nlp: {gpus: 8, borrow: false}}")
        .workers(aWorker().gpus(8), aWorker().gpus(8))
        .running(aRunningCall().group("nlp").on("w-x"))
        .queue(aCall().id("a").group("nlp").gpus(8), aCall().id("b").group("nlp").gpus(1)));
    assertEquals(Set.of("a"), placedIds(plan));
    WaitInfo b = waitOf(plan, "b");
    assertEquals(WaitCode.GROUP_QUOTA, b.code());
    assertEquals("group nlp quota reached: 8/8 GPUs", b.reason());
    assertTrue(b.suggestions().contains("qos scavenger would run it now on idle GPUs, as"
        + " preemptible"), b.suggestions().toString());
  }

  @Test
  void theOwnerReclaimsLentCapacityByPreemptingBorrowedWorkOnly() {
    Builders.SnapshotBuilder snapshot = aSnapshot()
        .policy("groups: {nlp: {gpus: 2}, vision: {gpus: 2}}")
        .workers(aWorker().id("w1").gpus(4))
        .running(
            aRunningCall().id("nlp-in").group("nlp").on("w1", 0, 1),
            aRunningCall().id("nlp-lent-a").group("nlp").on("w1", 2).preemptible(true),
            aRunningCall().id("nlp-lent-b").group("nlp").on("w1", 3).preemptible(true))
        .queue(aCall().id("vision-1").user("vic").group("vision").gpus(2));
    Plan plan = plan(snapshot);
    assertEquals(Set.of("nlp-lent-a", "nlp-lent-b"), plan.preemptions().stream()
        .map(Preemption::victimId).collect(Collectors.toSet()));
    assertTrue(plan.preemptions().stream().allMatch(p -> p.forCallId().equals("vision-1")));
    WaitInfo vision = waitOf(plan, "vision-1");
    assertEquals(WaitCode.PREEMPTING, vision.code());
    assertEquals(NOW.plusSeconds(30), vision.eta().orElseThrow());

    // Next pass: the victims are being stopped; nothing is chosen twice.
    Plan next = plan(aSnapshot()
        .policy("groups: {nlp: {gpus: 2}, vision: {gpus: 2}}")
        .workers(aWorker().id("w1").gpus(4))
        .running(aRunningCall().id("nlp-in").group("nlp").on("w1", 0, 1),
            aRunningCall().id("nlp-lent-a").group("nlp").on("w1", 2).preemptible(true)
                .preemptedFor("vision-1"),
            aRunningCall().id("nlp-lent-b").group("nlp").on("w1", 3).preemptible(true)
                .preemptedFor("vision-1"))
        .queue(aCall().id("vision-1").user("vic").group("vision").gpus(2)));
    assertTrue(next.preemptions().isEmpty());
    assertEquals("waiting for 2 preempted calls to stop and give back their GPUs",
        waitOf(next, "vision-1").reason());

    // Once they are gone the owner's call runs on the reclaimed GPUs.
    Plan after = plan(aSnapshot()
        .policy("groups: {nlp: {gpus: 2}, vision: {gpus: 2}}")
        .workers(aWorker().id("w1").gpus(4))
        .running(aRunningCall().id("nlp-in").group("nlp").on("w1", 0, 1))
        .queue(aCall().id("vision-1").user("vic").group("vision").gpus(2)));
    assertEquals(List.of(2, 3), after.placement("vision-1").orElseThrow().gpuIds());
  }

  @Test
  void theOwnerWaitsOutItsPatienceBeforeStoppingWorkThatWouldLoseMuch() {
    Builders.SnapshotBuilder snapshot = aSnapshot()
        .workers(aWorker().id("w1").gpus(1))
        .running(aRunningCall().id("sweep").qos("scavenger").on("w1", 0).preemptible(true)
            .startedAt(NOW.minus(Duration.ofHours(2))).walltime(Duration.ofHours(3))
            .savedAt(NOW.minus(Duration.ofHours(1))))
        .queue(aCall().id("owner").qos("batch").submittedAt(secondsAgo(10)));
    Plan patient = plan(snapshot);
    assertTrue(patient.preemptions().isEmpty());
    WaitInfo wait = waitOf(patient, "owner");
    assertEquals(WaitCode.CAPACITY, wait.code());
    assertTrue(wait.reason().endsWith("; preemptible work is reclaimed for it in 5m 50s unless"
        + " GPUs free first"), wait.reason());
    assertEquals(NOW.plusSeconds(350 + 30), wait.eta().orElseThrow());

    Plan eager = plan(snapshot.policy("scheduler: {reclaim_patience: 0}"));
    assertEquals(List.of("sweep"), eager.preemptions().stream().map(Preemption::victimId)
        .toList());
  }

  @Test
  void aGroupLendsOnlyWhatItsLendLimitAllowsAndKeepsTheRestForItsOwnCalls() {
    Builders.SnapshotBuilder snapshot = aSnapshot()
        .policy("groups: {nlp: {gpus: 2, lend: 1}, vision: {gpus: 2}}")
        .workers(aWorker().gpus(4))
        .queue(
            aCall().id("s1").user("bea").group("bio").qos("scavenger").submittedAt(secondsAgo(4)),
            aCall().id("s2").user("bea").group("bio").qos("scavenger").submittedAt(secondsAgo(3)),
            aCall().id("s3").user("bea").group("bio").qos("scavenger").submittedAt(secondsAgo(2)),
            aCall().id("s4").user("bea").group("bio").qos("scavenger").submittedAt(secondsAgo(1)));
    Plan plan = plan(snapshot);
    assertEquals(Set.of("s1", "s2", "s3"), placedIds(plan));
    WaitInfo s4 = waitOf(plan, "s4");
    assertEquals(WaitCode.NO_IDLE_CAPACITY, s4.code());
    assertTrue(s4.reason().startsWith("3/3 lendable GPUs are lent out"), s4.reason());

    Plan lendAll = plan(snapshot.policy("groups: {nlp: {gpus: 2}, vision: {gpus: 2}}"));
    assertEquals(4, lendAll.placements().size());
  }

  @Test
  void preemptionFreesTheNeededGpusAtTheLeastLostWork() {
    Plan plan = plan(aSnapshot()
        .workers(aWorker().id("w1").gpus(4))
        .running(
            aRunningCall().id("s-10m").qos("scavenger").on("w1", 0).preemptible(true)
                .savedAt(NOW.minus(Duration.ofMinutes(10))),
            aRunningCall().id("s-2h").qos("scavenger").on("w1", 1).preemptible(true)
                .savedAt(NOW.minus(Duration.ofHours(2))),
            aRunningCall().id("s-5m").qos("scavenger").on("w1", 2).preemptible(true)
                .savedAt(NOW.minus(Duration.ofMinutes(5))),
            aRunningCall().id("s-1h").qos("scavenger").on("w1", 3).preemptible(true)
                .savedAt(NOW.minus(Duration.ofHours(1))))
        .queue(aCall().id("need-2").gpus(2).qos("batch")));
    assertEquals(Set.of("s-5m", "s-10m"), plan.preemptions().stream()
        .map(Preemption::victimId).collect(Collectors.toSet()));
    assertEquals(900.0, plan.preemptions().stream().mapToDouble(Preemption::lostGpuSeconds).sum());
  }

  @Test
  void nonPreemptibleCallsAreNeverVictimsAndScavengersNeverPreempt() {
    Plan plan = plan(aSnapshot()
        .workers(aWorker().id("w1").gpus(2))
        .running(aRunningCall().id("batch").on("w1", 0),
            aRunningCall().id("scav").qos("scavenger").on("w1", 1).preemptible(true))
        .queue(aCall().id("want-2").gpus(2).qos("batch"),
            aCall().id("scav-2").qos("scavenger")));
    assertTrue(plan.preemptions().isEmpty(), plan.preemptions().toString());
    assertEquals(WaitCode.CAPACITY, waitOf(plan, "want-2").code());
  }

  @Test
  void aMultiGpuCallGetsGpusThatSitCloseOnTheBestWorker() {
    Plan plan = plan(aSnapshot()
        .workers(
            aWorker().id("far").gpus(8).nvlinkPairs(0, 1, 2, 3, 4, 5, 6, 7).free(0, 4),
            aWorker().id("near").gpus(8).nvlinkPairs(0, 1, 2, 3, 4, 5, 6, 7).free(0, 2, 3, 5))
        .queue(aCall().id("pair").gpus(2)));
    Placement pair = plan.placement("pair").orElseThrow();
    assertEquals("near", pair.workerId());
    assertEquals(List.of(2, 3), pair.gpuIds());
  }

  @Test
  void walltimeOverTheQosMaximumIsRefusedAndNamesTheClassThatAllowsIt() {
    Plan plan = plan(aSnapshot()
        .workers(aWorker().gpus(8))
        .queue(aCall().id("long").qos("interactive").walltime(Duration.ofHours(3))));
    assertEquals("walltime 3h is over qos interactive's maximum of 2h; qos batch allows up to 7d",
        plan.rejection("long").orElseThrow().reason());
  }

  @Test
  void aCallLongerThanEveryWorkersRemainingLifeWaitsAndIsToldTheWalltimeThatFits() {
    Plan plan = plan(aSnapshot()
        .workers(aWorker().gpus(8).expiresIn(Duration.ofMinutes(90)))
        .queue(aCall().id("batch").qos("batch").walltime(Duration.ofHours(4))));
    WaitInfo wait = waitOf(plan, "batch");
    assertEquals(WaitCode.WORKER_EXPIRY, wait.code());
    assertEquals(List.of("with a walltime of at most 1h 30m it would fit a worker now"),
        wait.suggestions());
  }

  @Test
  void fairShareServesTheUserWithLessRecentUsageFirstAndInterleavesWithinAPass() {
    Plan lighter = plan(aSnapshot()
        .workers(aWorker().gpus(1))
        .userUsage("ann", 36_000)
        .queue(aCall().id("ann").user("ann").submittedAt(secondsAgo(600)),
            aCall().id("bea").user("bea").submittedAt(secondsAgo(1))));
    assertEquals(Set.of("bea"), placedIds(lighter));

    Plan interleaved = plan(aSnapshot()
        .workers(aWorker().gpus(4))
        .queue(aCall().id("a1").user("ann").qos("batch").submittedAt(secondsAgo(60)),
            aCall().id("a2").user("ann").qos("batch").submittedAt(secondsAgo(59)),
            aCall().id("a3").user("ann").qos("batch").submittedAt(secondsAgo(58)),
            aCall().id("a4").user("ann").qos("batch").submittedAt(secondsAgo(57)),
            aCall().id("b1").user("bea").qos("batch").submittedAt(secondsAgo(10)),
            aCall().id("b2").user("bea").qos("batch").submittedAt(secondsAgo(9))));
    assertEquals(Set.of("a1", "a2", "b1", "b2"), placedIds(interleaved));
  }

  @Test
  void qosConcurrencyLimitNamesTheCountAndSuggestsAClassWithRoom() {
    Plan plan = plan(aSnapshot()
        .workers(aWorker().gpus(8))
        .running(aRunningCall().user("ann").qos("interactive").on("w-other"),
            aRunningCall().user("ann").qos("interactive").on("w-other"),
            aRunningCall().user("ann").qos("interactive").on("w-other"))
        .queue(aCall().id("4th").user("ann"), aCall().id("5th").user("ann")));
    assertEquals(Set.of("4th"), placedIds(plan));
    WaitInfo fifth = waitOf(plan, "5th");
    assertEquals("qos interactive: 4/4 concurrent calls for user ann", fifth.reason());
    assertEquals(List.of("qos batch has room for it (0/unlimited calls of yours)"),
        fifth.suggestions());
  }

  @Test
  void aWaitingCallGetsItsPositionReasonEstimateAndWhatWouldRunSooner() {
    Plan plan = plan(aSnapshot()
        .workers(aWorker().id("w1").gpus(4))
        .running(aRunningCall().on("w1", 0).startedAt(NOW.minus(Duration.ofMinutes(10)))
                .walltime(Duration.ofMinutes(30)),
            aRunningCall().on("w1", 1).startedAt(NOW.minus(Duration.ofMinutes(10)))
                .walltime(Duration.ofMinutes(60)))
        .queue(aCall().id("four").gpus(4).qos("batch")));
    WaitInfo wait = waitOf(plan, "four");
    assertEquals(1, wait.position());
    assertEquals("no worker has 4 GPUs free (most free on one worker: 2)", wait.reason());
    assertEquals(NOW.plus(Duration.ofMinutes(50)), wait.eta().orElseThrow());
    assertEquals(List.of("with 2 GPUs it would start now"), wait.suggestions());
  }

  @Test
  void aPassAskedForNoExplanationsPlacesTheSameAndStillPlansItsRevisit() {
    java.util.function.Supplier<Builders.SnapshotBuilder> cluster = () -> aSnapshot()
        .workers(aWorker().id("w1").gpus(2))
        .running(aRunningCall().on("w1", 0).startedAt(NOW.minus(Duration.ofMinutes(10)))
            .walltime(Duration.ofMinutes(30)))
        .queue(aCall().id("one").gpus(1), aCall().id("two").gpus(2).qos("batch"),
            aCall().id("fresh").gpus(1).submittedAt(secondsAgo(0)));
    Plan explained = plan(cluster.get());
    Plan quiet = plan(cluster.get().withoutExplanations());
    assertEquals(List.of("one"), quiet.placements().stream().map(Placement::callId).toList());
    assertEquals(explained.placements(), quiet.placements());
    assertEquals(1, explained.waiting().size(), "two is explained; fresh not yet");
    assertTrue(quiet.waiting().isEmpty());
    assertTrue(quiet.revisitAt().isPresent(), "fresh turns old enough to explain");
    assertEquals(explained.revisitAt(), quiet.revisitAt());
  }

  @Test
  void aCallJustQueuedIsNotExplainedYetButCountsForThePositionsBehindIt() {
    Plan plan = plan(aSnapshot()
        .workers(aWorker().id("w1").gpus(1))
        .running(aRunningCall().on("w1", 0))
        .queue(aCall().id("fresh").gpus(1).submittedAt(secondsAgo(0)).priority(1),
            aCall().id("old").gpus(1).submittedAt(secondsAgo(30))));
    assertTrue(plan.waitInfo("fresh").isEmpty(), plan.toString());
    assertEquals(2, waitOf(plan, "old").position());
  }

  @Test
  void neverIsApartFromNotNow() {
    Plan plan = plan(aSnapshot()
        .workers(aWorker().gpus(8), aWorker().gpus(8))
        .queue(aCall().id("sixteen").gpus(16), aCall().id("qos?").qos("turbo")));
    assertTrue(plan.waiting().isEmpty());
    assertTrue(plan.rejection("sixteen").orElseThrow().reason().startsWith(
        "no worker can run a call that asks for 16 GPUs, 1 CPU: the largest worker has 8"
            + " GPUs"));
    assertEquals("unknown qos 'turbo' (known: interactive, batch, scavenger)",
        plan.rejection("qos?").orElseThrow().reason());
  }

  @Test
  void dataLocalityPrefersTheWorkerThatHoldsTheInputs() {
    Plan plan = plan(aSnapshot()
        .workers(aWorker().id("empty").gpus(8), aWorker().id("holder").gpus(8)
            .holds("weights", 4L << 30))
        .queue(aCall().id("reader").input("weights", 4L << 30).input("tiny", 10)));
    assertEquals("holder", plan.placement("reader").orElseThrow().workerId());
  }

  @Test
  void theSamePassWithTheSameSeedGivesTheSamePlan() {
    Builders.SnapshotBuilder snapshot = aSnapshot()
        .workers(aWorker().gpus(8), aWorker().gpus(8), aWorker().gpus(8))
        .queue(aCall().id("x").gpus(3), aCall().id("y").gpus(5), aCall().id("z"));
    assertEquals(plan(snapshot).placements(), plan(snapshot).placements());
  }
}
