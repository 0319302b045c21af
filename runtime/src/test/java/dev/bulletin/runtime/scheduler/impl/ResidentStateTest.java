package dev.bulletin.runtime.scheduler.impl;

import static dev.bulletin.runtime.scheduler.Builders.CLOCK;
import static dev.bulletin.runtime.scheduler.Builders.aCall;
import static dev.bulletin.runtime.scheduler.Builders.aSnapshot;
import static dev.bulletin.runtime.scheduler.Builders.aWorker;
import static dev.bulletin.runtime.scheduler.Builders.scheduler;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.runtime.scheduler.Builders;
import dev.bulletin.runtime.scheduler.ClusterScheduler;
import dev.bulletin.runtime.scheduler.plan.Placement;
import dev.bulletin.runtime.scheduler.plan.Plan;
import dev.bulletin.runtime.scheduler.snapshot.GpuTopology;
import dev.bulletin.runtime.scheduler.snapshot.QueuedCall;
import dev.bulletin.runtime.scheduler.snapshot.WorkerState;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * Issue 29: GPUs that keep a notebook session's state between its cells. A call of that session
 * takes its state's GPU; other calls avoid it while another GPU fits as well; workers where a
 * call spills nobody's state are preferred among otherwise equal ones. Through the public API.
 */
class ResidentStateTest {

  /** A DGX-like box: NVLink pairs 0-1, 2-3, 4-5, 6-7; PCIe switches 0-3 and 4-7. */
  private static Builders.WorkerBuilder box(String id) {
    return aWorker().id(id).gpus(8).nvlinkPairs(0, 1, 2, 3, 4, 5, 6, 7)
        .pcieSwitch(0, 1, 2, 3).pcieSwitch(4, 5, 6, 7);
  }

  private static Placement placed(Builders.SnapshotBuilder snapshot) {
    Plan plan = scheduler().plan(snapshot.build());
    return plan.placement("x").orElseThrow(() -> new AssertionError(plan));
  }

  private static Placement placed(Builders.WorkerBuilder worker, QueuedCall.Builder call) {
    return placed(aSnapshot().workers(worker).queue(call));
  }

  @Test
  void aSessionsCallGetsItsStatesGpuAmongSeveralFree() {
    // GPU 3 is busy: packing alone would give GPU 2 (beside its busy NVLink partner).
    assertEquals(List.of(2), placed(box("w").free(0, 1, 2, 4, 5, 6, 7),
        aCall().id("x")).gpuIds());
    assertEquals(List.of(5), placed(box("w").free(0, 1, 2, 4, 5, 6, 7).keeps("s1", 5),
        aCall().id("x").residentSession("s1").preferredWorker("w")).gpuIds());
  }

  @Test
  void itsOwnStatesGpuIsTakenEvenWithoutAPreferredWorker() {
    assertEquals(List.of(6), placed(box("w").free(0, 1, 2, 4, 5, 6, 7).keeps("s1", 6),
        aCall().id("x").residentSession("s1")).gpuIds());
  }

  @Test
  void anotherSessionsCallAvoidsTheGpuWhileAnotherIsFree() {
    // Without state GPU 2 is packing's choice (its NVLink partner 3 is busy).
    Builders.WorkerBuilder clean = box("w").free(2, 4, 5);
    assertEquals(List.of(2), placed(clean, aCall().id("x")).gpuIds());
    for (String session : new String[] {"", "s2"}) {
      Placement placement = placed(box("w").free(2, 4, 5).keeps("s1", 2),
          aCall().id("x").residentSession(session));
      assertNotEquals(List.of(2), placement.gpuIds(), "session '" + session + "'");
    }
  }

  @Test
  void anotherSessionsCallTakesTheGpuWhenItIsTheOnlyOneFree() {
    assertEquals(List.of(2), placed(box("w").free(2).keeps("s1", 2),
        aCall().id("x").residentSession("s2")).gpuIds());
  }

  @Test
  void aCallTakesItsOwnSessionsGpuAndAvoidsAnothersOnTheSameWorker() {
    // Both free GPUs keep state: s1's is the call's own (no spill), s2's would be spilled.
    for (int own : new int[] {4, 6}) {
      int other = own == 4 ? 6 : 4;
      Placement placement = placed(box("w").free(4, 6).keeps("s1", own).keeps("s2", other),
          aCall().id("x").residentSession("s1"));
      assertEquals(List.of(own), placement.gpuIds());
    }
  }

  @Test
  void topologyComesBeforeTheStateForAMultiGpuCall() {
    // GPU 2's NVLink partner is busy: a pair with it would cross the switch's links, so the
    // call's own state there does not pull the pair off NVLink.
    Placement pair = placed(box("w").free(0, 1, 2, 4, 5).keeps("s1", 2),
        aCall().id("x").gpus(2).residentSession("s1"));
    assertTrue(Set.of(List.of(0, 1), List.of(4, 5)).contains(pair.gpuIds()), pair.toString());
    // Among equally close pairs, the one that keeps its state.
    assertEquals(List.of(0, 1), placed(box("w").free(0, 1, 4, 5),
        aCall().id("x").gpus(2)).gpuIds());
    assertEquals(List.of(4, 5), placed(box("w").free(0, 1, 4, 5).keeps("s1", 4, 5),
        aCall().id("x").gpus(2).residentSession("s1")).gpuIds());
    // And another session's pair is left alone while an equally close one is free.
    assertEquals(List.of(4, 5), placed(box("w").free(0, 1, 4, 5).keeps("s1", 0, 1),
        aCall().id("x").gpus(2)).gpuIds());
  }

  @Test
  void aFractionalCallOpensAGpuWithoutState() {
    assertEquals(List.of(0), placed(box("w").free(0, 1), aCall().id("x").gpus(0).gpuEighths(4))
        .gpuIds());
    assertEquals(List.of(1), placed(box("w").free(0, 1).keeps("s1", 0),
        aCall().id("x").gpus(0).gpuEighths(4)).gpuIds());
  }

  @Test
  void amongEqualWorkersTheOneWhereTheCallSpillsNobodysState() {
    // Same free GPUs on both; one keeps another session's state on both of them. Whichever it
    // is, and whatever order the seed shuffles the workers into, the call goes to the other.
    for (String keeper : new String[] {"a", "b"}) {
      for (long seed = 1; seed <= 8; seed++) {
        ClusterScheduler scheduler = ClusterScheduler.create(CLOCK, seed, () -> 0L);
        String other = keeper.equals("a") ? "b" : "a";
        Plan plan = scheduler.plan(aSnapshot()
            .workers(box(keeper).free(4, 5).keeps("s1", 4, 5), box(other).free(4, 5))
            .queue(aCall().id("x")).build());
        assertEquals(other, plan.placement("x").orElseThrow().workerId(),
            "s1 on " + keeper + ", seed " + seed);
      }
    }
  }

  @Test
  void sparingAStateOutweighsALittlePackingButNotDataLocality() {
    // "fuller" has one free GPU, which keeps s1's state; "roomy" has three clean ones. Packing
    // alone prefers fuller by 2 GPUs of 8 (0.25 x packing's weight); sparing s1 weighs more.
    assertEquals("fuller", placed(aSnapshot().workers(box("fuller").free(7),
        box("roomy").free(5, 6, 7)).queue(aCall().id("x"))).workerId());
    assertEquals("roomy", placed(aSnapshot().workers(box("fuller").free(7).keeps("s1", 7),
        box("roomy").free(5, 6, 7)).queue(aCall().id("x"))).workerId());
    // An idle worker is not worth sparing a state for (packing by 7 GPUs of 8).
    assertEquals("fuller", placed(aSnapshot().workers(box("fuller").free(7).keeps("s1", 7),
        box("idle")).queue(aCall().id("x"))).workerId());
    // Its inputs held there outweigh the spill.
    assertEquals("fuller", placed(aSnapshot().workers(
        box("fuller").free(7).keeps("s1", 7).holds("data", 8L << 30),
        box("roomy").free(5, 6, 7)).queue(aCall().id("x").input("data", 8L << 30)))
        .workerId());
  }

  @Test
  void aSessionsCallGoesToItsStatesWorkerAndGpu() {
    Placement placement = placed(aSnapshot().workers(box("fuller").free(0, 1),
        box("keeper").keeps("s1", 6).keeps("s2", 3)).queue(aCall().id("x")
            .preferredWorker("keeper").residentSession("s1")));
    assertEquals("keeper", placement.workerId());
    assertEquals(List.of(6), placement.gpuIds());
  }

  @Test
  void residentGpusAreValidated() {
    GpuTopology two = GpuTopology.uniform(2, GpuTopology.Link.HOST);
    IllegalArgumentException outside = assertThrows(IllegalArgumentException.class,
        () -> new WorkerState("w1", two, Set.of(0, 1), 4, 4, 1, 1, Map.of(), false,
            WorkerState.NEVER, Map.of(2, "s1")));
    assertEquals("worker w1: resident GPU 2 is outside 0..1", outside.getMessage());
    IllegalArgumentException blank = assertThrows(IllegalArgumentException.class,
        () -> new WorkerState("w1", two, Set.of(0, 1), 4, 4, 1, 1, Map.of(), false,
            WorkerState.NEVER, Map.of(1, " ")));
    assertEquals("worker w1: resident GPU 1 needs the key of the session whose state it keeps",
        blank.getMessage());
    WorkerState none = new WorkerState("w1", two, Set.of(0, 1), 4, 4, 1, 1, Map.of(), false,
        WorkerState.NEVER);
    assertEquals(Map.of(), none.residentGpus());
    assertEquals(Map.of(1, "s1"), none.withResidentGpus(Map.of(1, "s1")).residentGpus());
  }
}
