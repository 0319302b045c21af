package dev.bulletin.runtime.scheduler.sim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.runtime.scheduler.Demand;
import dev.bulletin.runtime.scheduler.WorkerSlots;
import java.util.List;
import org.junit.jupiter.api.Test;

class FirstFitSchedulerTest {

  private static final long GIB = 1L << 30;
  private final FirstFitScheduler scheduler = new FirstFitScheduler();

  private static WorkerSlots worker(String id, int gpus, double cpus) {
    return new WorkerSlots(id, gpus, true, cpus, 16 * GIB);
  }

  @Test
  void placesOnTheFirstWorkerWithRoomAndNamesItsLowestFreeGpus() {
    WorkerSlots busy = worker("a", 1, 4);
    busy.reserve(new Demand(1, 1, 0), List.of(0));
    WorkerSlots free = worker("b", 2, 4);
    Decision decision = scheduler.decide(new Demand(1, 1, 0), List.of(busy, free));
    assertEquals(new Decision.Placed("b", List.of(0)), decision);
  }

  @Test
  void moreGpusThanAnyWorkerHasIsInfeasibleAndSaysWhatTheClusterHas() {
    Decision decision = scheduler.decide(new Demand(4, 1, 0), List.of(worker("a", 1, 2)));
    Decision.Infeasible infeasible = assertInstanceOf(Decision.Infeasible.class, decision);
    assertTrue(infeasible.reason().contains("4 GPUs"), infeasible.reason());
    assertTrue(infeasible.reason().contains("1 GPU (simulated)"), infeasible.reason());
  }

  @Test
  void moreMemoryThanAnyWorkerHasIsInfeasible() {
    Decision decision = scheduler.decide(new Demand(0, 1, 64 * GIB), List.of(worker("a", 0, 2)));
    assertInstanceOf(Decision.Infeasible.class, decision);
  }

  @Test
  void aCallThatFitsAnIdleWorkerWaitsWithTheReasonWhileItIsBusy() {
    WorkerSlots worker = worker("a", 1, 2);
    worker.reserve(new Demand(1, 1, 0), List.of(0));
    Decision decision = scheduler.decide(new Demand(1, 1, 0), List.of(worker));
    Decision.Wait wait = assertInstanceOf(Decision.Wait.class, decision);
    assertEquals("no worker has 1 GPU free (most free on one worker: 0)", wait.reason());
  }

  @Test
  void freeingSlotsMakesThemAvailableAgain() {
    WorkerSlots worker = worker("a", 2, 2);
    Demand demand = new Demand(2, 2, 0);
    worker.reserve(demand, List.of(0, 1));
    assertInstanceOf(Decision.Wait.class, scheduler.decide(new Demand(0, 1, 0), List.of(worker)));
    worker.free(demand, List.of(0, 1));
    assertEquals(new Decision.Placed("a", List.of(0, 1)), scheduler.decide(demand, List.of(worker)));
  }

  @Test
  void anEmptyClusterIsInfeasible() {
    Decision decision = scheduler.decide(new Demand(0, 1, 0), List.of());
    assertEquals(new Decision.Infeasible("no worker has joined the cluster"), decision);
  }

  @Test
  void invalidDemandsNameTheField() {
    assertTrue(assertThrows(IllegalArgumentException.class, () -> new Demand(-1, 1, 0))
        .getMessage().startsWith("gpus"));
    assertTrue(assertThrows(IllegalArgumentException.class, () -> new Demand(0, 0, 0))
        .getMessage().startsWith("cpus"));
  }
}
