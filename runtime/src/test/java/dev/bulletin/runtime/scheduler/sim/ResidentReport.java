package dev.bulletin.runtime.scheduler.sim;

import java.util.List;
import java.util.Locale;
import java.util.function.Predicate;
import java.util.function.ToDoubleFunction;

/**
 * The lab week's "bulletin, resident" against "bulletin" (sessions that keep nothing): where each
 * session's next cell found its state, and per group the calls' wait, with the ratio and whether
 * any grew by more than {@link #LIMIT} (issue 29's goal). "worker only" tells the scheduler only
 * the state's worker (as before the GPU preference); "no prefer" keeps the same state and costs
 * with nothing told to the scheduler: the controls for what the preferences do.
 */
final class ResidentReport {
  /** The goal: no group's wait grows by more than 5 %. */
  static final double LIMIT = 1.05;

  private ResidentReport() {}

  static String table(LabWeek.Result none, LabWeek.Result resident, LabWeek.Result workerOnly,
      LabWeek.Result noPrefer) {
    StringBuilder out = new StringBuilder();
    ResidentSessions r = resident.resident;
    ResidentSessions o = workerOnly.resident;
    out.append(String.format(Locale.ROOT, "State per session %.1f GiB; spill %.1f GB/s device to"
        + " host (%.2f s), restore %.1f GB/s host to device (%.2f s), %.1f GB/s between hosts"
        + " (%.2f s more)%n", r.bytes / (double) (1L << 30),
        ResidentSessions.SPILL_BYTES_PER_SECOND / 1e9, r.spillSeconds(),
        ResidentSessions.RESTORE_BYTES_PER_SECOND / 1e9, r.restoreSeconds(),
        ResidentSessions.NETWORK_BYTES_PER_SECOND / 1e9, r.networkSeconds()));
    ResidentSessions c = noPrefer.resident;
    ResidentSessions[] all = {r, o, c};
    out.append(String.format(Locale.ROOT, "%-44s %16s %16s %16s%n", "next cells (a session's"
        + " cells after its first)", resident.name, workerOnly.name, noPrefer.name));
    row(out, "  found the state on its GPU (hit)", all, s -> s.hits);
    row(out, "  restored on the same worker", all, s -> s.restoredSameWorker);
    row(out, "    of which moved off its GPU by itself", all, s -> s.movedFromItsGpu);
    row(out, "    of which spilled by another call", all, s -> s.restoredAfterSpill);
    row(out, "  restored on another worker", all, s -> s.restoredOtherWorker);
    out.append(String.format(Locale.ROOT, "%-44s %16d %16d %16d%n", "  all", r.nextCells(),
        o.nextCells(), c.nextCells()));
    out.append(String.format(Locale.ROOT, "%-44s %16s %16s %16s%n",
        "spills by other calls (GPU-s)", spills(r), spills(o), spills(c)));
    out.append(String.format(Locale.ROOT, "%-44s %16d %16d %16d%n", "GPU-s cells spent restoring",
        Math.round(r.restoreSecondsOfCells), Math.round(o.restoreSecondsOfCells),
        Math.round(c.restoreSecondsOfCells)));
    out.append(String.format(Locale.ROOT, "%-44s %16d %16d %16d%n", "restarts after a preemption",
        r.restartsAfterPreemption, o.restartsAfterPreemption, c.restartsAfterPreemption));
    Predicate<SimCall> notebook = call -> call.id.startsWith("nb");
    double[] worst = new double[1];
    String[] where = {""};
    for (LabWeek.Result way : List.of(resident, workerOnly, noPrefer)) {
      worst[0] = 0;
      out.append(String.format(Locale.ROOT, "%nQueue wait (submit to first start), \"%s\" against"
          + " \"%s\" (sessions keep nothing)%n", way.name, none.name));
      block(out, "notebook calls", none, way, notebook, SimCall::waitSeconds, worst, where);
      block(out, "batch and sweep calls", none, way, notebook.negate(), SimCall::waitSeconds,
          worst, where);
      out.append(String.format(Locale.ROOT, "largest growth: %+.1f%% (%s): %s%n",
          100 * (worst[0] - 1), where[0], worst[0] > LIMIT ? "MORE than 5 %" : "within 5 %"));
    }
    out.append(String.format(Locale.ROOT, "%nNotebook calls' wait until their work began (queue"
        + " wait + spill/restore), \"%s\" against \"%s\"%n", resident.name, none.name));
    block(out, "notebook calls", none, resident, notebook,
        call -> call.waitSeconds() + call.overheadSeconds, new double[1], new String[1]);
    return out.toString();
  }

  /**
   * The same comparison over several weeks (trace seeds): per week the share of hits and, per
   * group, the ratio of its notebook calls' p95 and mean wait to "bulletin"'s; then all weeks'
   * calls pooled. A closed loop diverges on any change (a restore of 0.18 s shifts every later
   * event of that session), so the spread across weeks and the control runs ("no prefer": same
   * costs, no preference; "0 B": the preference with nothing to move; "64 MiB": a restore of
   * 6 ms) show what is noise.
   */
  static String weeks(long[] seeds) {
    String[] ways = {"resident", "worker only", "no prefer", "0 B, prefer", "64 MiB"};
    StringBuilder out = new StringBuilder(String.format(Locale.ROOT, "%-12s %-6s %6s", "way",
        "week", "hits"));
    for (String group : LabTrace.GROUPS) {
      out.append(String.format(Locale.ROOT, " %-15s", group + " p95/mean"));
    }
    out.append('\n');
    java.util.Map<String, List<SimCall>> pooled = new java.util.LinkedHashMap<>();
    for (long seed : seeds) {
      LabTrace trace = LabTrace.generate(seed);
      LabWeek.Result none = LabWeek.bulletin(trace, seed);
      pooled.computeIfAbsent("bulletin", k -> new java.util.ArrayList<>()).addAll(none.calls);
      List<LabWeek.Result> runs = List.of(
          LabWeek.resident(ways[0], trace, seed, ResidentSessions.Mode.GPU),
          LabWeek.resident(ways[1], trace, seed, ResidentSessions.Mode.WORKER),
          LabWeek.resident(ways[2], trace, seed, ResidentSessions.Mode.NONE),
          LabWeek.resident(ways[3], trace, seed, ResidentSessions.Mode.GPU, 0),
          LabWeek.resident(ways[4], trace, seed, ResidentSessions.Mode.GPU, 64L << 20));
      for (LabWeek.Result run : runs) {
        pooled.computeIfAbsent(run.name, k -> new java.util.ArrayList<>()).addAll(run.calls);
        out.append(String.format(Locale.ROOT, "%-12s %-6d %5.1f%%", run.name, seed,
            100.0 * run.resident.hits / run.resident.nextCells()));
        ratios(out, none.calls, run.calls);
      }
    }
    for (String way : ways) {
      out.append(String.format(Locale.ROOT, "%-12s %-6s %6s", way, "pooled", ""));
      ratios(out, pooled.get("bulletin"), pooled.get(way));
    }
    return out.toString();
  }

  private static void ratios(StringBuilder out, List<SimCall> before, List<SimCall> after) {
    for (String group : LabTrace.GROUPS) {
      Predicate<SimCall> which = c -> c.done() && c.group.equals(group) && c.id.startsWith("nb");
      double[] b = before.stream().filter(which).mapToDouble(SimCall::waitSeconds).toArray();
      double[] a = after.stream().filter(which).mapToDouble(SimCall::waitSeconds).toArray();
      out.append(String.format(Locale.ROOT, " %-15s", String.format(Locale.ROOT, "%.2f/%.2f",
          Stats.percentile(a, 95) / Stats.percentile(b, 95), mean(a) / mean(b))));
    }
    out.append('\n');
  }

  private static void row(StringBuilder out, String label, ResidentSessions[] runs,
      java.util.function.ToIntFunction<ResidentSessions> count) {
    out.append(String.format(Locale.ROOT, "%-44s", label));
    for (ResidentSessions run : runs) {
      out.append(String.format(Locale.ROOT, " %16s", share(count.applyAsInt(run), run)));
    }
    out.append('\n');
  }

  private static String spills(ResidentSessions r) {
    return r.spillsByOthers + " (" + Math.round(r.spillSecondsOfOthers) + ")";
  }

  private static String share(int count, ResidentSessions r) {
    return String.format(Locale.ROOT, "%d (%.1f%%)", count, 100.0 * count / r.nextCells());
  }

  /** Per group: p50, p95 and mean of {@code wait}, before -> after (ratio). */
  private static void block(StringBuilder out, String kind, LabWeek.Result before,
      LabWeek.Result after, Predicate<SimCall> which, ToDoubleFunction<SimCall> wait,
      double[] worst, String[] where) {
    out.append(String.format(Locale.ROOT, "  %-22s %6s %-24s %-24s %-24s%n", kind, "calls",
        "p50", "p95", "mean"));
    String[] names = {"p50", "p95", "mean"};
    for (String group : LabTrace.GROUPS) {
      double[] b = waits(before, group, which, wait);
      double[] a = waits(after, group, which, wait);
      out.append(String.format(Locale.ROOT, "  %-22s %6d", group, a.length));
      double[][] stats = {{Stats.percentile(b, 50), Stats.percentile(a, 50)},
          {Stats.percentile(b, 95), Stats.percentile(a, 95)}, {mean(b), mean(a)}};
      for (int s = 0; s < stats.length; s++) {
        double ratio = stats[s][0] == 0 ? (stats[s][1] == 0 ? 1 : Double.POSITIVE_INFINITY)
            : stats[s][1] / stats[s][0];
        if (ratio > worst[0]) {
          worst[0] = ratio;
          where[0] = kind + ", " + group + ", " + names[s];
        }
        out.append(String.format(Locale.ROOT, " %-24s", Stats.minutes(stats[s][0]) + " -> "
            + Stats.minutes(stats[s][1]) + (Double.isInfinite(ratio) ? " (from 0)"
                : String.format(Locale.ROOT, " (%.2fx)", ratio))));
      }
      out.append('\n');
    }
  }

  private static double[] waits(LabWeek.Result result, String group, Predicate<SimCall> which,
      ToDoubleFunction<SimCall> wait) {
    return result.calls.stream().filter(c -> c.done() && c.group.equals(group) && which.test(c))
        .mapToDouble(wait).toArray();
  }

  private static double mean(double[] values) {
    return java.util.Arrays.stream(values).average().orElse(Double.NaN);
  }
}
