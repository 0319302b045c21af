package dev.bulletin.runtime.scheduler;

import static dev.bulletin.runtime.scheduler.Builders.GIB;
import static dev.bulletin.runtime.scheduler.Builders.aCall;
import static dev.bulletin.runtime.scheduler.Builders.aSnapshot;
import static dev.bulletin.runtime.scheduler.Builders.aWorker;
import static dev.bulletin.runtime.scheduler.Builders.scheduler;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.runtime.scheduler.plan.Plan;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/** The scheduler's one answer to "can this call ever run on this cluster, and if not, why". */
class FeasibilityTest {

  private static final WorkerCapacity EIGHT = new WorkerCapacity(8, false, 64, 512 * GIB);
  private static final WorkerCapacity TWO = new WorkerCapacity(2, false, 16, 64 * GIB);
  private static final WorkerCapacity CPU_ONLY = new WorkerCapacity(0, false, 128, 1024 * GIB);

  private static ClusterCapacity cluster(WorkerCapacity... workers) {
    return ClusterCapacity.of(List.of(workers));
  }

  private static Feasibility feasible(Demand demand, ClusterCapacity cluster) {
    return scheduler().feasible(demand, cluster);
  }

  @Test
  void theClusterKeepsEachDistinctShapeOnceInTheOrderFirstSeen() {
    List<WorkerCapacity> workers = new ArrayList<>();
    for (int i = 0; i < 500; i++) {
      workers.add(new WorkerCapacity(8, false, 64, 512 * GIB));  // equal, not the same object
      workers.add(TWO);
    }
    ClusterCapacity two = ClusterCapacity.of(workers);
    assertEquals(List.of(EIGHT, TWO), two.shapes());
    assertEquals(1000, two.workers());

    // Past a few shapes they are looked up in a set: the answer is the same.
    List<WorkerCapacity> many = new ArrayList<>();
    List<WorkerCapacity> distinct = new ArrayList<>();
    for (int round = 0; round < 3; round++) {
      for (int gpus = 0; gpus < 40; gpus++) {
        WorkerCapacity shape = new WorkerCapacity(gpus, false, 8, GIB);
        many.add(shape);
        if (round == 0) {
          distinct.add(shape);
        }
      }
    }
    ClusterCapacity forty = ClusterCapacity.of(many);
    assertEquals(distinct, forty.shapes());
    assertEquals(120, forty.workers());
  }

  @Test
  void aCallThatFitsSomeWorkerWhenIdleIsFeasible() {
    assertEquals(Feasibility.FEASIBLE, feasible(new Demand(8, 64, 512 * GIB), cluster(TWO, EIGHT)));
    assertTrue(feasible(new Demand(0, 100, 0), cluster(EIGHT, CPU_ONLY)).feasible());
  }

  static Stream<Arguments> refusals() {
    return Stream.of(
        Arguments.of("more GPUs than any worker has", new Demand(16, 1, 0), cluster(TWO, EIGHT),
            "no worker can run a call that asks for 16 GPUs, 1 CPU: the largest worker has 8"
                + " GPUs, 64 CPUs, 512.0 GiB memory (2 workers in the cluster)"),
        Arguments.of("more memory than any worker has", new Demand(1, 1, 2048 * GIB),
            cluster(EIGHT, CPU_ONLY),
            "no worker can run a call that asks for 1 GPU, 1 CPU, 2.0 TiB memory: the largest"
                + " worker has 8 GPUs, 64 CPUs, 512.0 GiB memory (2 workers in the cluster)"),
        Arguments.of("more CPUs than any worker has", new Demand(0, 256, 0), cluster(CPU_ONLY),
            "no worker can run a call that asks for 0 GPUs, 256 CPUs: the largest worker has 0"
                + " GPUs, 128 CPUs, 1.0 TiB memory (1 worker in the cluster)"),
        Arguments.of("the GPUs and the CPUs it needs are on different workers",
            new Demand(4, 100, 0), cluster(EIGHT, CPU_ONLY),
            "no worker can run a call that asks for 4 GPUs, 100 CPUs: the largest worker has 8"
                + " GPUs, 64 CPUs, 512.0 GiB memory (2 workers in the cluster)"),
        Arguments.of("simulated GPUs say so", new Demand(4, 1, 0),
            cluster(new WorkerCapacity(1, true, 2, 16 * GIB)),
            "no worker can run a call that asks for 4 GPUs, 1 CPU: the largest worker has 1 GPU"
                + " (simulated), 2 CPUs, 16.0 GiB memory (1 worker in the cluster)"),
        Arguments.of("a GPU call on a cluster without GPUs names --simulate-gpus",
            new Demand(1, 1, 0), cluster(CPU_ONLY),
            "no worker can run a call that asks for 1 GPU, 1 CPU: the largest worker has 0"
                + " GPUs, 128 CPUs, 1.0 TiB memory (1 worker in the cluster); this cluster has no"
                + " GPUs: on a machine without GPUs, start it with `bulletin up --simulate-gpus N`"
                + " to run GPU calls on N simulated GPUs"),
        Arguments.of("no worker at all", new Demand(0, 1, 0), ClusterCapacity.EMPTY,
            "no worker has joined the cluster"));
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("refusals")
  void aCallNoWorkerCouldEverRunIsInfeasibleAndSaysWhatTheClusterHas(String name, Demand demand,
      ClusterCapacity cluster, String reason) {
    Feasibility answer = feasible(demand, cluster);
    assertFalse(answer.feasible());
    assertEquals(reason, assertInstanceOf(Feasibility.Infeasible.class, answer).reason());
  }

  @Test
  void workersOfOneShapeAreOneShapeButAllCountInTheReason() {
    ClusterCapacity thousand = ClusterCapacity.of(Collections.nCopies(1000, EIGHT));
    assertEquals(List.of(EIGHT), thousand.shapes());
    assertEquals(1000, thousand.workers());
    String reason = assertInstanceOf(Feasibility.Infeasible.class,
        feasible(new Demand(9, 1, 0), thousand)).reason();
    assertTrue(reason.endsWith("(1000 workers in the cluster)"), reason);
  }

  @Test
  void aPassRefusesInTheSameWordsAsTheEntry() {
    Plan plan = scheduler().plan(aSnapshot()
        .workers(aWorker().gpus(8), aWorker().gpus(2).memoryBytes(64 * GIB))
        .queue(aCall().id("big").gpus(16)).build());
    Feasibility entry = feasible(new Demand(16, 1, 0), cluster(EIGHT,
        new WorkerCapacity(2, false, 64, 64 * GIB)));
    assertEquals(assertInstanceOf(Feasibility.Infeasible.class, entry).reason(),
        plan.rejection("big").orElseThrow().reason());
  }

  @Test
  void aPassWithNoUsableWorkerWaitsForOneInsteadOfRefusing() {
    Plan plan = scheduler().plan(aSnapshot().workers(aWorker().gpus(8).draining())
        .queue(aCall().id("x").gpus(16)).build());
    assertTrue(plan.rejection("x").isEmpty(), plan.toString());
    assertEquals("every worker is draining; waiting for a worker to join",
        plan.waitInfo("x").orElseThrow().reason());
  }
}
