package dev.bulletin.runtime.scheduler.impl;

import static dev.bulletin.runtime.scheduler.Builders.GIB;
import static dev.bulletin.runtime.scheduler.Builders.NOW;
import static dev.bulletin.runtime.scheduler.Builders.aCall;
import static dev.bulletin.runtime.scheduler.Builders.aRunningCall;
import static dev.bulletin.runtime.scheduler.Builders.aSnapshot;
import static dev.bulletin.runtime.scheduler.Builders.aWorker;
import static dev.bulletin.runtime.scheduler.Builders.scheduler;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.runtime.scheduler.Builders;
import dev.bulletin.runtime.scheduler.plan.FilterReason;
import dev.bulletin.runtime.scheduler.plan.Plan;
import dev.bulletin.runtime.scheduler.plan.Preemption;
import dev.bulletin.runtime.scheduler.plan.WaitCode;
import dev.bulletin.runtime.scheduler.plan.WaitInfo;
import java.time.Duration;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/** Worker filters, scores and selection, and the preemption planner, table-driven. */
class SelectionTest {

  static Stream<Arguments> placements() {
    return Stream.of(
        Arguments.of("packing: the fuller worker (best fit)", aSnapshot()
            .workers(aWorker().id("idle").gpus(8), aWorker().id("half").gpus(8).free(4, 5, 6, 7))
            .queue(aCall().id("x").gpus(2)), "half"),
        Arguments.of("a draining worker takes nothing", aSnapshot()
            .workers(aWorker().id("draining").gpus(8).free(0).draining(),
                aWorker().id("idle").gpus(8))
            .queue(aCall().id("x")), "idle"),
        Arguments.of("CPUs filter: a worker without the CPUs is skipped", aSnapshot()
            .workers(aWorker().id("few").gpus(8).free(0).cpus(2), aWorker().id("many").gpus(8))
            .queue(aCall().id("x").cpus(4)), "many"),
        Arguments.of("memory filter", aSnapshot()
            .workers(aWorker().id("small").gpus(8).free(0).memoryBytes(16 * GIB),
                aWorker().id("big").gpus(8))
            .queue(aCall().id("x").memoryBytes(64 * GIB)), "big"),
        Arguments.of("expiry filter: the worker must outlive the walltime", aSnapshot()
            .workers(aWorker().id("ending").gpus(8).free(0).expiresIn(Duration.ofMinutes(30)),
                aWorker().id("stays").gpus(8))
            .queue(aCall().id("x").walltime(Duration.ofHours(1))), "stays"),
        Arguments.of("topology outweighs packing for a pair", aSnapshot()
            .workers(aWorker().id("split").gpus(8).nvlinkPairs(0, 1, 2, 3).free(0, 2),
                aWorker().id("pair").gpus(8).nvlinkPairs(0, 1, 2, 3).free(0, 1, 4))
            .queue(aCall().id("x").gpus(2)), "pair"),
        Arguments.of("locality outweighs packing for large inputs", aSnapshot()
            .workers(aWorker().id("full").gpus(8).free(0),
                aWorker().id("holder").gpus(8).holds("data", 8L << 30))
            .queue(aCall().id("x").input("data", 8L << 30)), "holder"),
        Arguments.of("small inputs are not worth steering for", aSnapshot()
            .workers(aWorker().id("full").gpus(8).free(0),
                aWorker().id("holder").gpus(8).holds("data", 1000))
            .queue(aCall().id("x").input("data", 1000)), "full"),
        Arguments.of("a call reading resident values prefers the worker that keeps them",
            aSnapshot().workers(aWorker().id("fuller").gpus(8).free(0, 1),
                aWorker().id("keeper").gpus(8))
            .queue(aCall().id("x").preferredWorker("keeper")), "keeper"),
        Arguments.of("without them, packing picks the fuller worker", aSnapshot()
            .workers(aWorker().id("fuller").gpus(8).free(0, 1), aWorker().id("keeper").gpus(8))
            .queue(aCall().id("x")), "fuller"),
        Arguments.of("CPU-only call prefers a worker whose GPUs are busy", aSnapshot()
            .workers(aWorker().id("gpus-free").gpus(8), aWorker().id("gpus-busy").gpus(8).free())
            .queue(aCall().id("x").gpus(0)), "gpus-busy"));
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("placements")
  void placesOn(String name, Builders.SnapshotBuilder snapshot, String worker) {
    Plan plan = scheduler().plan(snapshot.build());
    assertEquals(worker, plan.placement("x").orElseThrow(() -> new AssertionError(plan))
        .workerId());
  }

  static Stream<Arguments> preemptions() {
    return Stream.of(
        Arguments.of("one 2-GPU victim over two 1-GPU victims when it loses less", aSnapshot()
            .workers(aWorker().id("w").gpus(4).free())
            .running(aRunningCall().id("pair").qos("scavenger").preemptible(true).on("w", 0, 1)
                    .savedAt(NOW.minus(Duration.ofMinutes(5))),
                aRunningCall().id("a").qos("scavenger").preemptible(true).on("w", 2)
                    .savedAt(NOW.minus(Duration.ofMinutes(20))),
                aRunningCall().id("b").qos("scavenger").preemptible(true).on("w", 3)
                    .savedAt(NOW.minus(Duration.ofMinutes(20))))
            .queue(aCall().id("x").gpus(2)), Set.of("pair")),
        Arguments.of("the worker where it costs least", aSnapshot()
            .workers(aWorker().id("w1").gpus(2).free(), aWorker().id("w2").gpus(2).free())
            .running(aRunningCall().id("w1-old").qos("scavenger").preemptible(true).on("w1", 0, 1)
                    .savedAt(NOW.minus(Duration.ofHours(3))),
                aRunningCall().id("w2-new").qos("scavenger").preemptible(true).on("w2", 0, 1)
                    .savedAt(NOW.minus(Duration.ofMinutes(3))))
            .queue(aCall().id("x").gpus(2)), Set.of("w2-new")),
        Arguments.of("free GPUs count: only the missing one is freed", aSnapshot()
            .workers(aWorker().id("w").gpus(4).free(0))
            .running(aRunningCall().id("cheap").qos("scavenger").preemptible(true).on("w", 1)
                    .savedAt(NOW.minus(Duration.ofMinutes(1))),
                aRunningCall().id("dear").qos("scavenger").preemptible(true).on("w", 2)
                    .savedAt(NOW.minus(Duration.ofMinutes(50))),
                aRunningCall().id("fixed").qos("batch").on("w", 3))
            .queue(aCall().id("x").gpus(2)), Set.of("cheap")),
        Arguments.of("calls already being stopped are not chosen again", aSnapshot()
            .workers(aWorker().id("w").gpus(2).free())
            .running(aRunningCall().id("stopping").qos("scavenger").preemptible(true).on("w", 0)
                    .preemptedFor("other"),
                aRunningCall().id("open").qos("scavenger").preemptible(true).on("w", 1))
            .queue(aCall().id("x").gpus(2)), Set.of()),
        Arguments.of("a borrowed (over-quota) call preempts nothing", aSnapshot()
            .policy("groups: {nlp: {gpus: 0}}")
            .workers(aWorker().id("w").gpus(1).free())
            .running(aRunningCall().id("scav").qos("scavenger").preemptible(true).on("w", 0))
            .queue(aCall().id("x").group("nlp")), Set.of()),
        Arguments.of("preemption can be switched off", aSnapshot()
            .policy("scheduler: {max_preemptors_per_pass: 0}")
            .workers(aWorker().id("w").gpus(1).free())
            .running(aRunningCall().id("scav").qos("scavenger").preemptible(true).on("w", 0))
            .queue(aCall().id("x")), Set.of()));
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("preemptions")
  void preempts(String name, Builders.SnapshotBuilder snapshot, Set<String> victims) {
    Plan plan = scheduler().plan(snapshot.build());
    assertEquals(new TreeSet<>(victims), plan.preemptions().stream().map(Preemption::victimId)
        .collect(Collectors.toCollection(TreeSet::new)));
  }

  /** Three workers with 8 GPUs free, each turned down for one named reason. */
  private static Builders.SnapshotBuilder oneRejectionOfEachKind() {
    return aSnapshot().workers(aWorker().id("few-cpus").gpus(8).cpus(2),
        aWorker().id("little-memory").gpus(8).memoryBytes(16 * GIB),
        aWorker().id("ending").gpus(8).expiresIn(Duration.ofMinutes(30)));
  }

  @Test
  void theWorkerKeepingResidentValuesIsScoredBeyondTheCandidateLimit() {
    // Forty idle workers: the bucket scan stops at 8 candidates, before it meets the keeper.
    Builders.WorkerBuilder[] workers = new Builders.WorkerBuilder[41];
    for (int i = 0; i < 40; i++) {
      workers[i] = aWorker().id("idle-" + i).gpus(8);
    }
    workers[40] = aWorker().id("keeper").gpus(8);
    Plan plan = scheduler().plan(aSnapshot().workers(workers)
        .queue(aCall().id("x").preferredWorker("keeper")).build());
    assertEquals("keeper", plan.placement("x").orElseThrow().workerId());
  }

  @Test
  void filterRejectionsAreNamedAndCountedPerReason() {
    Plan plan = scheduler().plan(oneRejectionOfEachKind()
        .queue(aCall().id("x").cpus(4).memoryBytes(64 * GIB).walltime(Duration.ofHours(1)))
        .build());
    assertEquals(Map.of(FilterReason.CPUS, 1, FilterReason.MEMORY, 1,
        FilterReason.WORKER_EXPIRY, 1), plan.stats().filtered());
    // Workers short of CPUs and memory among them: it waits for capacity, not for a worker.
    WaitInfo wait = plan.waitInfo("x").orElseThrow();
    assertEquals(WaitCode.CAPACITY, wait.code());
    assertEquals("no worker with 1 GPU free has 4 CPUs and 64.0 GiB memory free", wait.reason());
  }

  @Test
  void aCallPlacedAfterARejectionStillCountsIt() {
    Plan plan = scheduler().plan(oneRejectionOfEachKind()
        .queue(aCall().id("x").walltime(Duration.ofHours(1))).build());
    assertEquals(Map.of(FilterReason.WORKER_EXPIRY, 1), plan.stats().filtered());
    assertEquals(1, plan.stats().filtered(FilterReason.WORKER_EXPIRY));
    assertEquals(0, plan.stats().filtered(FilterReason.CPUS));
    // few-cpus and little-memory took it: it is placed, after one expiry rejection.
    assertTrue(plan.placement("x").isPresent(), plan.toString());
  }

  @Test
  void onlyExpiryRejectionsMakeAWorkerExpiryWait() {
    Plan plan = scheduler().plan(aSnapshot()
        .workers(aWorker().id("ending").gpus(8).expiresIn(Duration.ofMinutes(30)))
        .queue(aCall().id("x").walltime(Duration.ofHours(1))).build());
    assertEquals(Map.of(FilterReason.WORKER_EXPIRY, 1), plan.stats().filtered());
    WaitInfo wait = plan.waitInfo("x").orElseThrow();
    assertEquals(WaitCode.WORKER_EXPIRY, wait.code());
    assertEquals("no worker with 1 GPU free stays up for the walltime of 1h", wait.reason());
  }

  @Test
  void aShapeThatFoundNoWorkerIsNotScannedOrCountedAgainInThePass() {
    Plan plan = scheduler().plan(oneRejectionOfEachKind()
        .queue(aCall().id("x").cpus(4).memoryBytes(64 * GIB).walltime(Duration.ofHours(1)),
            aCall().id("y").cpus(8).memoryBytes(64 * GIB).walltime(Duration.ofHours(2)))
        .build());
    assertEquals(Map.of(FilterReason.CPUS, 1, FilterReason.MEMORY, 1,
        FilterReason.WORKER_EXPIRY, 1), plan.stats().filtered());
    assertEquals(WaitCode.CAPACITY, plan.waitInfo("y").orElseThrow().code());
  }
}
