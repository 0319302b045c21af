package dev.bulletin.runtime.scheduler.impl;

import static dev.bulletin.runtime.scheduler.Builders.aCall;
import static dev.bulletin.runtime.scheduler.Builders.aSnapshot;
import static dev.bulletin.runtime.scheduler.Builders.aWorker;
import static dev.bulletin.runtime.scheduler.Builders.scheduler;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.runtime.scheduler.ClusterScheduler;
import dev.bulletin.runtime.scheduler.plan.Plan;
import dev.bulletin.runtime.scheduler.snapshot.Snapshot;
import dev.bulletin.runtime.scheduler.snapshot.WorkerState;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * One scheduler keeps each worker's row from pass to pass while the snapshot hands the same
 * worker state: what a pass takes stays in that pass, and a worker whose state is new is read
 * anew.
 */
class KeptRowsTest {

  private final ClusterScheduler scheduler = scheduler();

  @Test
  void whatOnePassTakesIsFreeAgainInTheNextOverTheSameStates() {
    Snapshot snapshot = aSnapshot().workers(aWorker().id("a").gpus(2), aWorker().id("b").gpus(1))
        .queue(aCall().id("x").gpus(2), aCall().id("y").gpus(0).gpuEighths(4),
            aCall().id("z").gpus(0).gpuEighths(4))
        .build();
    Plan first = scheduler.plan(snapshot);
    assertEquals(3, first.placements().size(), first.toString());
    Plan second = scheduler.plan(snapshot);
    assertEquals(first.placements(), second.placements());
  }

  @Test
  void aWorkerWhoseStateIsNewIsReadAnew() {
    Snapshot before = aSnapshot().workers(aWorker().id("a").gpus(2), aWorker().id("b").gpus(2))
        .queue(aCall().id("x").gpus(2)).build();
    assertEquals(1, scheduler.plan(before).placements().size());

    List<WorkerState> workers = new ArrayList<>(before.workers());
    for (int i = 0; i < workers.size(); i++) {
      WorkerState w = workers.get(i);
      workers.set(i, new WorkerState(w.id(), w.topology(), Set.of(1), w.cpus(), w.freeCpus(),
          w.memoryBytes(), w.freeMemoryBytes(), w.heldObjects(), w.draining(), w.expiresAt()));
    }
    Plan after = scheduler.plan(new Snapshot(workers, before.running(), before.queue(),
        before.usage(), before.policy()));
    assertTrue(after.placements().isEmpty(), "each worker has one GPU free now: " + after);

    Plan one = scheduler.plan(new Snapshot(workers, before.running(),
        List.of(aCall().id("y").build()), before.usage(), before.policy()));
    assertEquals(List.of(1), one.placements().get(0).gpuIds());
  }

  @Test
  void aWorkerThatStartsDrainingOrDropsItsSessionStateIsReadAnew() {
    Snapshot kept = aSnapshot().workers(aWorker().id("a").gpus(2).keeps("s1", 0))
        .queue(aCall().id("x")).build();
    assertEquals(List.of(1), scheduler.plan(kept).placements().get(0).gpuIds());

    Snapshot dropped = aSnapshot().workers(aWorker().id("a").gpus(2)).queue(aCall().id("x"))
        .build();
    assertEquals(List.of(0), scheduler.plan(dropped).placements().get(0).gpuIds());

    Snapshot draining = aSnapshot().workers(aWorker().id("a").gpus(2).draining())
        .queue(aCall().id("x")).build();
    Plan plan = scheduler.plan(draining);
    assertTrue(plan.placements().isEmpty(), plan.toString());
  }
}
