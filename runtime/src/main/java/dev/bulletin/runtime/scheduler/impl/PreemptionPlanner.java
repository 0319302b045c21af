package dev.bulletin.runtime.scheduler.impl;

import dev.bulletin.runtime.scheduler.snapshot.RunningCall;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Frees room for an entitled call that found none: an in-quota call of a non-preemptible QoS may
 * stop preemptible calls (a preemptible QoS, or borrowed capacity over quota) and nothing else.
 * On each worker it takes the set of victims that makes the call fit at the least lost work
 * (GPU-seconds since each victim's start or checkpoint), exhaustively over subsets when a worker
 * has at most {@value #EXACT_VICTIMS} victims, else greedily by lost work per GPU; across workers
 * the least lost work wins, then fewer victims, then closer GPUs. A victim chosen once in a pass,
 * or already being stopped, is not chosen again.
 */
final class PreemptionPlanner {
  private static final int EXACT_VICTIMS = 10;

  /** A preemptible running call on a known worker. */
  static final class Victim {
    final RunningCall call;
    final int worker;
    final long gpus;
    final double lost;
    boolean taken;

    Victim(RunningCall call, int worker, long gpus) {
      this.call = call;
      this.worker = worker;
      this.gpus = gpus;
      this.lost = call.lostGpuSeconds();
    }
  }

  private final Map<Integer, List<Victim>> byWorker = new HashMap<>();
  private final int[] workers;

  /** The cheapest victims after a successful {@link #plan}; {@link #commit} takes them. */
  int chosenWorker;
  List<Victim> chosen = List.of();
  double chosenLost;

  PreemptionPlanner(List<RunningCall> running, ClusterIndex index) {
    for (RunningCall call : running) {
      Integer w = index.byId.get(call.workerId());
      if (call.preemptible() && !call.beingPreempted() && w != null) {
        long mask = 0;
        for (int gpu : call.gpuIds()) {
          mask |= 1L << gpu;
        }
        byWorker.computeIfAbsent(w, k -> new ArrayList<>()).add(new Victim(call, w, mask));
      }
    }
    workers = byWorker.keySet().stream().mapToInt(i -> i).sorted().toArray();
  }

  boolean hasVictims() {
    return workers.length > 0;
  }

  /** Finds the cheapest victims for {@code row} (not yet taken); true with {@link #chosen}. */
  boolean plan(CallRow row, ClusterIndex index, long nowMillis) {
    double bestLost = Double.POSITIVE_INFINITY;
    int bestCount = Integer.MAX_VALUE;
    double bestTopology = -1;
    List<Victim> best = null;
    for (int w : workers) {
      if (!index.usable[w] || !WorkerFilter.STAYS_UP.accepts(row, w, index, nowMillis)
          || index.gpuCount[w] < row.gpus) {
        continue;
      }
      List<Victim> open = new ArrayList<>();
      for (Victim v : byWorker.get(w)) {
        if (!v.taken) {
          open.add(v);
        }
      }
      List<Victim> set = open.size() <= EXACT_VICTIMS ? exact(row, w, open, index)
          : greedy(row, w, open, index);
      if (set == null) {
        continue;
      }
      double lost = 0;
      long freed = index.freeMask[w];
      for (Victim v : set) {
        lost += v.lost;
        freed |= v.gpus;
      }
      double topology = GpuPicker.topologyScore(index.distances[w], index.gpuCount[w],
          GpuPicker.pick(index.distances[w], index.gpuCount[w], freed, row.gpus));
      if (lost < bestLost || (lost == bestLost && (set.size() < bestCount
          || (set.size() == bestCount && topology > bestTopology)))) {
        bestLost = lost;
        bestCount = set.size();
        bestTopology = topology;
        best = set;
        chosenWorker = w;
      }
    }
    if (best == null) {
      return false;
    }
    chosen = best;
    chosenLost = bestLost;
    return true;
  }

  /** Takes the chosen victims: no later call of the pass chooses them again. */
  void commit() {
    for (Victim v : chosen) {
      v.taken = true;
    }
  }

  private static boolean fits(CallRow row, int w, ClusterIndex index, int gpus, double cpus,
      long memory) {
    return index.freeCount[w] + gpus >= row.gpus && index.freeCpus[w] + cpus >= row.cpus - 1e-9
        && index.freeMemory[w] + memory >= row.memory;
  }

  private static List<Victim> exact(CallRow row, int w, List<Victim> open, ClusterIndex index) {
    int n = open.size();
    int bestMask = -1;
    double bestLost = Double.POSITIVE_INFINITY;
    int bestCount = Integer.MAX_VALUE;
    for (int mask = 1; mask < (1 << n); mask++) {
      int gpus = 0;
      double cpus = 0;
      long memory = 0;
      double lost = 0;
      for (int i = 0; i < n; i++) {
        if ((mask & (1 << i)) != 0) {
          Victim v = open.get(i);
          gpus += v.call.gpus();
          cpus += v.call.cpus();
          memory += v.call.memoryBytes();
          lost += v.lost;
        }
      }
      int count = Integer.bitCount(mask);
      if (fits(row, w, index, gpus, cpus, memory)
          && (lost < bestLost || (lost == bestLost && count < bestCount))) {
        bestMask = mask;
        bestLost = lost;
        bestCount = count;
      }
    }
    if (bestMask < 0) {
      return null;
    }
    List<Victim> set = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      if ((bestMask & (1 << i)) != 0) {
        set.add(open.get(i));
      }
    }
    return set;
  }

  private static List<Victim> greedy(CallRow row, int w, List<Victim> open, ClusterIndex index) {
    List<Victim> sorted = new ArrayList<>(open);
    sorted.sort((a, b) -> Double.compare(a.lost / Math.max(1, a.call.gpus()),
        b.lost / Math.max(1, b.call.gpus())));
    List<Victim> set = new ArrayList<>();
    int gpus = 0;
    double cpus = 0;
    long memory = 0;
    for (Victim v : sorted) {
      if (fits(row, w, index, gpus, cpus, memory)) {
        return set;
      }
      set.add(v);
      gpus += v.call.gpus();
      cpus += v.call.cpus();
      memory += v.call.memoryBytes();
    }
    return fits(row, w, index, gpus, cpus, memory) ? set : null;
  }
}
