package dev.bulletin.runtime.scheduler.sim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * A small run of each simulation, part of {@code make test}: the drivers refuse to double-book a
 * GPU, so a run that completes placed nothing twice. The full runs are {@code make
 * bench-scheduler}.
 */
class SimSmokeTest {

  private static List<SimCall> run(BaseDriver driver, Des des, List<SimCall> trace) {
    List<SimCall> calls = trace.stream().map(SimCall::copy).toList();
    for (SimCall call : calls) {
      des.at(des.now() + call.submitMillis, () -> driver.submit(call));
    }
    des.run(Long.MAX_VALUE);
    return calls;
  }

  @Test
  void aClusterTraceRunsToCompletionUnderThePolicyAndUnderFifo() {
    int workers = 40;
    List<SimCall> trace = ClusterTrace.calls(2_000, 3, 1.0, workers * 8);
    Des policyDes = new Des(1_000_000_000_000L);
    PolicyDriver policy = new PolicyDriver(policyDes, ClusterTrace.workers(workers),
        ClusterTrace.policy(), 3, 10, Duration.ofDays(1), ClusterBench.CPU);
    List<SimCall> policyCalls = run(policy, policyDes, trace);
    Des fifoDes = new Des(1_000_000_000_000L);
    List<SimCall> fifoCalls = run(new FifoDriver(fifoDes, ClusterTrace.workers(workers), 10),
        fifoDes, trace);

    assertEquals(2_000, policyCalls.stream().filter(SimCall::done).count());
    assertEquals(2_000, fifoCalls.stream().filter(SimCall::done).count());
    assertTrue(policy.queue.isEmpty() && policy.running.isEmpty());
    assertTrue(closeShare(policyCalls) > closeShare(fifoCalls),
        closeShare(policyCalls) + " vs " + closeShare(fifoCalls));
  }

  private static double closeShare(List<SimCall> calls) {
    List<SimCall> multi = calls.stream().filter(c -> c.gpus > 1).toList();
    return (double) multi.stream().filter(c -> c.closeGpus).count() / multi.size();
  }

  @Test
  void aLabDayServesEveryCellAndHoldsNoGpuIdleUnlikeSessionsThatHoldOne() {
    LabTrace trace = LabTrace.generate(5, 1);
    LabWeek.Result bulletin = LabWeek.bulletin(trace, 5);
    LabWeek.Result hold = LabWeek.hold(trace);
    assertTrue(bulletin.calls.stream().allMatch(SimCall::done));
    assertTrue(hold.calls.stream().allMatch(SimCall::done));
    assertTrue(bulletin.heldIdleGpuSeconds < 1, "held idle " + bulletin.heldIdleGpuSeconds);
    assertTrue(hold.heldIdleGpuSeconds > 3600, "held idle " + hold.heldIdleGpuSeconds);
    assertEquals(bulletin.firstResults.size(), bulletin.calls.stream()
        .map(c -> c.cell).filter(java.util.Objects::nonNull).distinct().count());
  }

  @Test
  void residentSessionsFindTheirStateOnTheGpuMoreOftenWhenTheirCallsPreferItsWorker() {
    LabTrace trace = LabTrace.generate(5, 1);
    LabWeek.Result resident = LabWeek.resident("resident", trace, 5,
        ResidentSessions.Mode.GPU);
    LabWeek.Result noPrefer = LabWeek.resident("no prefer", trace, 5,
        ResidentSessions.Mode.NONE);
    for (LabWeek.Result r : List.of(resident, noPrefer)) {
      assertTrue(r.calls.stream().allMatch(SimCall::done));
      // Cells run, less each session's first: every next cell is counted once.
      long cells = r.firstResults.size();
      long sessions = r.calls.stream().map(c -> c.state).filter(java.util.Objects::nonNull)
          .distinct().count();
      ResidentSessions s = r.resident;
      assertEquals(cells - sessions, s.hits + s.restoredSameWorker + s.restoredOtherWorker,
          r.name);
    }
    assertTrue(resident.calls.stream().anyMatch(c -> !c.preferredWorker.isEmpty()));
    assertTrue(noPrefer.calls.stream().allMatch(c -> c.preferredWorker.isEmpty()));
    assertTrue(resident.resident.hits > 0);
    assertTrue(resident.resident.hits > noPrefer.resident.hits,
        resident.resident.hits + " hits with the preference, " + noPrefer.resident.hits
            + " without");
  }

  @Test
  void residentBookkeepingWithNothingToMoveAndNoPreferenceIsTheBulletinWayCallByCall() {
    LabTrace trace = LabTrace.generate(5, 1);
    LabWeek.Result bulletin = LabWeek.bulletin(trace, 5);
    LabWeek.Result empty = LabWeek.resident("empty", trace, 5,
        ResidentSessions.Mode.NONE, 0);
    assertEquals(bulletin.calls.size(), empty.calls.size());
    for (int i = 0; i < bulletin.calls.size(); i++) {
      assertEquals(bulletin.calls.get(i).firstStartMillis, empty.calls.get(i).firstStartMillis);
      assertEquals(bulletin.calls.get(i).endMillis, empty.calls.get(i).endMillis);
    }
  }
}
