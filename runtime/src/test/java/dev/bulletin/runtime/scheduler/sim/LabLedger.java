package dev.bulletin.runtime.scheduler.sim;

import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;

/**
 * The lab week as the usage ledger ({@code bulletin usage --by group}) would report it: per
 * group, GPU-hours reserved against GPU-hours busy. Busy comes from a utilisation model per
 * job, fixed by the job's id and the seed so both ways of sharing see the same jobs: a notebook
 * call keeps its GPU 35-85 % busy (data loading and Python between kernels), a batch run or a
 * sweep call 70-95 %. Reserved is what the way of sharing held: under bulletin a call's GPUs
 * while it runs (runs lost to preemption included); under "hold" a notebook session's GPU from
 * when it opens until it closes, and batch runs while they run.
 */
final class LabLedger {
  private LabLedger() {}

  /** The utilisation model: a job's GPUs' busy share while it runs. */
  static double utilisation(SimCall call, long seed) {
    double u = new SplittableRandom(seed ^ call.id.hashCode() * 0x9E3779B97F4A7C15L)
        .nextDouble();
    return call.id.startsWith("nb") ? 0.35 + 0.5 * u : 0.70 + 0.25 * u;
  }

  static String table(long seed) {
    LabTrace trace = LabTrace.generate(seed);
    List<LabWeek.Result> results = List.of(LabWeek.bulletin(trace, seed), LabWeek.hold(trace));
    StringBuilder out = new StringBuilder(String.format(Locale.ROOT, "%-10s", "group"));
    for (LabWeek.Result r : results) {
      out.append(String.format(Locale.ROOT, " | %-8s %9s %10s %6s", r.name, "GPU-h res",
          "GPU-h busy", "busy"));
    }
    out.append('\n');
    double[][] totals = new double[results.size()][2];
    for (String group : LabTrace.GROUPS) {
      out.append(String.format(Locale.ROOT, "%-10s", group));
      for (int i = 0; i < results.size(); i++) {
        double[] row = ledger(results.get(i), group, seed);
        totals[i][0] += row[0];
        totals[i][1] += row[1];
        out.append(cells(results.get(i).name, row));
      }
      out.append('\n');
    }
    out.append(String.format(Locale.ROOT, "%-10s", "all"));
    for (int i = 0; i < results.size(); i++) {
      out.append(cells(results.get(i).name, totals[i]));
    }
    return out.append('\n').toString();
  }

  private static String cells(String name, double[] row) {
    return String.format(Locale.ROOT, " | %-8s %9.1f %10.1f %5.0f%%", "", row[0] / 3600,
        row[1] / 3600, row[0] == 0 ? 0 : 100 * row[1] / row[0]);
  }

  /** {GPU-seconds reserved, GPU-seconds busy} of one group under one way of sharing. */
  static double[] ledger(LabWeek.Result result, String group, long seed) {
    boolean sessionsHold = !result.sessionGpuSeconds.isEmpty();
    double reserved = result.sessionGpuSeconds.getOrDefault(group, 0.0);
    double busy = 0;
    for (SimCall call : result.calls) {
      if (!call.group.equals(group) || !call.done()) {
        continue;
      }
      // Work lost to preemption was held and computed, then thrown away: reserved and busy.
      double ran = call.gpus * call.work + call.lostGpuSeconds;
      if (!(sessionsHold && call.id.startsWith("nb"))) {
        reserved += ran;
      }
      busy += utilisation(call, seed) * ran;
    }
    return new double[] {reserved, busy};
  }
}
