package dev.bulletin.runtime.scheduler.sim;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * The benchmark entry point ({@code make bench-scheduler}): runs only with
 * {@code -Dbulletin.bench=true} and prints tables; it asserts nothing about time.
 * {@code -Dbulletin.bench.calls=N} shrinks the dynamic run for a quick look;
 * {@code -Dbulletin.bench.loads=1.05} runs only that load;
 * {@code -Dbulletin.bench.policyOnly=true} runs only the policy column (a backfill variant; the
 * goals then compare with the documented baselines at 1.05 load);
 * {@code -Dbulletin.bench.breakdown=true} also prints, per QoS and size, how many calls waited
 * past their first pass. {@code -Dbulletin.bench.labWeeks=11,12} sets the weeks (trace seeds) of
 * the lab week's resident-state summary ("" skips it); {@code -Dtest=SchedulerBench#labWeek}
 * runs only the lab week (under a minute and a half).
 */
class SchedulerBench {

  @Test
  void clusterAtScale() {
    Assumptions.assumeTrue(Boolean.getBoolean("bulletin.bench"), "set -Dbulletin.bench=true");
    int calls = Integer.getInteger("bulletin.bench.calls", 100_000);
    if (!Boolean.getBoolean("bulletin.bench.skipStatic")) {
      System.out.println("\n== Simulation 1a: one pass, 1,000 workers x 8 GPUs ==");
      System.out.println(ClusterBench.staticPasses(new int[] {10_000, 50_000, 100_000}, 7));
    }
    // A short run first so the measured runs see compiled code, as a long-running runtime does.
    ClusterBench.dynamic(Math.min(calls, 5_000), 0.97, 8, 10);
    String loads = System.getProperty("bulletin.bench.loads", "0.97,1.05");
    // The runtime passes at once when quiet and coalesces under load (control/Passes); the
    // simulation's default of one pass per 10 s keeps 100,000 calls quick to simulate, and sets
    // a floor under every wait (a call placed in the first pass waits up to the interval).
    double passInterval = Double.parseDouble(
        System.getProperty("bulletin.bench.passInterval", "10"));
    for (double load : java.util.Arrays.stream(loads.split(",")).mapToDouble(Double::parseDouble)
        .toArray()) {
      System.out.println("== Simulation 1b: " + calls + " calls arriving at " + load + " x"
          + " capacity, policy vs FIFO first-fit (passes coalesced to one per " + passInterval
          + " s) ==");
      System.out.println(ClusterBench.dynamic(calls, load, 7, passInterval));
    }
  }

  /**
   * Simulation 1a alone ({@code -Dtest=SchedulerBench#onePass}, a few minutes);
   * {@code -Dbulletin.bench.residentShare=0.3} puts notebook sessions' state on that share of
   * the GPUs and has that share of the calls read one (see {@code ClusterBench}).
   */
  @Test
  void onePass() {
    Assumptions.assumeTrue(Boolean.getBoolean("bulletin.bench"), "set -Dbulletin.bench=true");
    System.out.println("\n== Simulation 1a: one pass, 1,000 workers x 8 GPUs (resident share "
        + System.getProperty("bulletin.bench.residentShare", "0") + ") ==");
    System.out.println(ClusterBench.staticPasses(new int[] {10_000, 50_000, 100_000}, 7));
  }

  @Test
  void labWeek() {
    Assumptions.assumeTrue(Boolean.getBoolean("bulletin.bench"), "set -Dbulletin.bench=true");
    System.out.println("\n== Simulation 2: a lab week, 20 users in 4 groups on 16 GPUs ==");
    LabTrace trace = LabTrace.generate(11);
    java.util.List<LabWeek.Result> ways = LabWeek.ways(trace, 11);
    System.out.println(LabWeek.compare(trace, ways));
    System.out.println("== Notebook sessions that keep GPU state between cells (\"resident\","
        + " see ResidentSessions) ==");
    System.out.println(ResidentReport.table(ways.get(0), ways.get(2),
        LabWeek.resident("worker only", trace, 11, ResidentSessions.Mode.WORKER),
        LabWeek.resident("no prefer", trace, 11, ResidentSessions.Mode.NONE)));
    String weeks = System.getProperty("bulletin.bench.labWeeks", "11,12,13,14,15");
    if (!weeks.isEmpty()) {
      System.out.println("== The same over weeks " + weeks + ": notebook calls' wait against"
          + " \"bulletin\", per group (p95 ratio / mean ratio) ==");
      System.out.println(ResidentReport.weeks(java.util.Arrays.stream(weeks.split(","))
          .mapToLong(Long::parseLong).toArray()));
    }
    System.out.println("== The usage ledger's view of the lab week: GPU-hours reserved against"
        + " busy per group (busy from a utilisation model per job, see LabLedger) ==");
    System.out.println(LabLedger.table(11));
  }
}
