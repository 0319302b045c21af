package dev.bulletin.runtime.scheduler.impl;

import static dev.bulletin.runtime.scheduler.Builders.aCall;
import static dev.bulletin.runtime.scheduler.Builders.aSnapshot;
import static dev.bulletin.runtime.scheduler.Builders.aWorker;
import static dev.bulletin.runtime.scheduler.Builders.scheduler;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.runtime.scheduler.Builders;
import dev.bulletin.runtime.scheduler.plan.Placement;
import dev.bulletin.runtime.scheduler.plan.Plan;
import dev.bulletin.runtime.scheduler.plan.WaitCode;
import dev.bulletin.runtime.scheduler.plan.WaitInfo;
import dev.bulletin.runtime.scheduler.snapshot.QueuedCall;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Issue 29: a call whose values are live on one worker's GPUs (not spilled) can read them only
 * there. It runs there, on any GPUs when the ones that keep its state are free, or waits: it is
 * never placed where it would fail, and it does not make a worker the pools would start, or a
 * preemption elsewhere, wait for it. Where holding it would hold it forever (its worker is
 * gone, or could never run it) it goes wherever it fits, as before.
 */
class LiveStateTest {

  private static Builders.WorkerBuilder twoGpus(String id) {
    return aWorker().id(id).gpus(2);
  }

  /** A call of session s1 whose values are live on {@code keeper}. */
  private static QueuedCall.Builder cellOn(String keeper) {
    return aCall().id("x").residentSession("s1").preferredWorker(keeper).keptLive(true);
  }

  private static Plan plan(Builders.SnapshotBuilder snapshot) {
    return scheduler().plan(snapshot.build());
  }

  @Test
  void itWaitsForItsKeepersGpuWhileAnotherWorkerIsIdle() {
    // GPU 0 of "keeper" keeps s1's state and runs the owner's own call (not free).
    Plan plan = plan(aSnapshot().workers(twoGpus("keeper").free(1).keeps("s1", 0),
        twoGpus("idle")).queue(cellOn("keeper")));
    assertTrue(plan.placement("x").isEmpty(), plan.toString());
    WaitInfo wait = plan.waitInfo("x").orElseThrow(() -> new AssertionError(plan));
    assertEquals(WaitCode.STATE_ON_GPU, wait.code());
    assertEquals("values it reads are kept on GPU 0 of worker keeper (live, not spilled: a value"
        + " on a GPU moves only once it is spilled); a GPU that keeps them is taken (by your own"
        + " call, in the executor that keeps them), and it runs there once the GPU is free",
        wait.reason());
  }

  @Test
  void itRunsOnItsKeeperOnceTheGpuIsFree() {
    Placement placement = plan(aSnapshot().workers(twoGpus("keeper").keeps("s1", 1),
        twoGpus("other"), twoGpus("third")).queue(cellOn("keeper"))).placement("x")
        .orElseThrow();
    assertEquals("keeper", placement.workerId());
    assertEquals(List.of(1), placement.gpuIds());
  }

  @Test
  void onItsKeeperAnyFreeGpusDoWhenNoneIsMarked() {
    // The worker knows no GPU of the session's: the agent there spills the user's idle
    // executors first and the call restores their values wherever it lands.
    Placement placement = plan(aSnapshot().workers(twoGpus("keeper").free(1), twoGpus("idle"))
        .queue(cellOn("keeper"))).placement("x").orElseThrow();
    assertEquals("keeper", placement.workerId());
    assertEquals(List.of(1), placement.gpuIds());
  }

  @Test
  void aSpilledStateLetsItRunWherever() {
    // The same cluster, the keeper full: held, it waits; spilled (not live), it runs elsewhere.
    Builders.SnapshotBuilder held = aSnapshot().workers(twoGpus("keeper").free().keeps("s1", 0),
        twoGpus("idle")).queue(cellOn("keeper"));
    assertTrue(plan(held).placement("x").isEmpty());
    Placement placement = plan(aSnapshot().workers(twoGpus("keeper").free().keeps("s1", 0),
        twoGpus("idle")).queue(aCall().id("x").residentSession("s1").preferredWorker("keeper")))
        .placement("x").orElseThrow();
    assertEquals("idle", placement.workerId());
  }

  @Test
  void aKeeperThatIsGoneOrTooSmallHoldsNothing() {
    assertEquals("other", plan(aSnapshot().workers(twoGpus("other")).queue(cellOn("gone")))
        .placement("x").orElseThrow().workerId());
    // Four GPUs: the keeper has two, so it could never run it there.
    assertEquals("big", plan(aSnapshot().workers(twoGpus("keeper").keeps("s1", 0),
        aWorker().id("big").gpus(4)).queue(cellOn("keeper").gpus(4))).placement("x")
        .orElseThrow().workerId());
  }

  @Test
  void aDrainingKeeperHoldsItUntilTheValuesAreSpilled() {
    Plan plan = plan(aSnapshot().workers(twoGpus("keeper").keeps("s1", 0).draining(),
        twoGpus("idle")).queue(cellOn("keeper")));
    WaitInfo wait = plan.waitInfo("x").orElseThrow(() -> new AssertionError(plan));
    assertEquals(WaitCode.STATE_ON_GPU, wait.code());
    assertTrue(wait.reason().endsWith("that worker is draining, and it waits until they are"
        + " spilled there"), wait.reason());
  }

  @Test
  void itsWaitDoesNotHoldBackAnotherCallOfTheSameShape() {
    // Failed shapes stop later calls early; a held call's wait says nothing about the others.
    Plan plan = plan(aSnapshot().workers(twoGpus("keeper").free(1).keeps("s1", 0),
        twoGpus("idle")).queue(cellOn("keeper"), aCall().id("y")));
    assertTrue(plan.placement("x").isEmpty());
    assertTrue(plan.placement("y").isPresent(), plan.toString());
  }

  @Test
  void keptLiveNeedsTheWorkerThatKeepsThem() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> aCall().id("x").keptLive(true).build());
    assertEquals("queued call x: keptLive needs the preferredWorker that keeps its values",
        e.getMessage());
  }
}
