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
 * or already being stopped, is not chosen again. Shares of a GPU count as their fraction: a
 * fractional call frees room for another share on its GPU, and the whole GPU for a whole-GPU
 * call only with every other sharer of it.
 */
final class PreemptionPlanner {
  private static final int EXACT_VICTIMS = 10;

  /** A preemptible running call on a known worker. */
  static final class Victim {
    final RunningCall call;
    final int worker;
    final long gpus;
    /** A fractional victim's share of its one GPU in eighths; 0 when it holds its GPUs whole. */
    final int eighths;
    final double lost;
    boolean taken;

    Victim(RunningCall call, int worker, long gpus, long nowMillis) {
      this.call = call;
      this.worker = worker;
      this.gpus = gpus;
      this.eighths = call.gpuEighths();
      this.lost = call.lostGpuSeconds(nowMillis);
    }
  }

  private final Map<Integer, List<Victim>> byWorker = new HashMap<>();
  private final int[] workers;

  /** The cheapest victims after a successful {@link #plan}; {@link #commit} takes them. */
  int chosenWorker;
  List<Victim> chosen = List.of();
  double chosenLost;

  PreemptionPlanner(List<RunningCall> running, ClusterIndex index, long nowMillis) {
    for (RunningCall call : running) {
      Integer w = index.byId.get(call.workerId());
      if (call.preemptible() && !call.beingPreempted() && w != null) {
        long mask = 0;
        for (int gpu : call.gpuIds()) {
          mask |= 1L << gpu;
        }
        byWorker.computeIfAbsent(w, k -> new ArrayList<>()).add(new Victim(call, w, mask, nowMillis));
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
      for (Victim v : set) {
        lost += v.lost;
      }
      long freed = new Freed(index, w, set).freeMask();
      double topology = row.fractional() ? 1.0 : GpuPicker.topologyScore(index.distances[w],
          index.gpuCount[w], GpuPicker.pick(index.distances[w], index.gpuCount[w], freed,
              row.gpus));
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

  /** What a worker would have free with a set of victims gone. */
  private static final class Freed {
    private final ClusterIndex index;
    private final int w;
    /** Per GPU, the eighths free with the victims gone (8: the GPU is free). */
    private final int[] room;
    private double cpus;
    private long memory;

    Freed(ClusterIndex index, int w, List<Victim> victims) {
      this.index = index;
      this.w = w;
      this.room = new int[index.gpuCount[w]];
      for (int g = 0; g < room.length; g++) {
        room[g] = index.shareFree[w][g];
      }
      victims.forEach(this::add);
    }

    void add(Victim v) {
      if (v.eighths > 0) {
        room[Long.numberOfTrailingZeros(v.gpus)] += v.eighths;
      } else {
        for (long m = v.gpus; m != 0; m &= m - 1) {
          room[Long.numberOfTrailingZeros(m)] = dev.bulletin.runtime.scheduler.Demand.EIGHTHS;
        }
      }
      cpus += v.call.cpus();
      memory += v.call.memoryBytes();
    }

    long freeMask() {
      long mask = 0;
      for (int g = 0; g < room.length; g++) {
        if (room[g] >= dev.bulletin.runtime.scheduler.Demand.EIGHTHS) {
          mask |= 1L << g;
        }
      }
      return mask;
    }

    boolean fits(CallRow row) {
      boolean gpus;
      if (row.fractional()) {
        gpus = false;
        for (int free : room) {
          gpus |= free >= row.eighths;
        }
      } else {
        gpus = Long.bitCount(freeMask()) >= row.gpus;
      }
      return gpus && index.freeCpus[w] + cpus >= row.cpus - 1e-9
          && index.freeMemory[w] + memory >= row.memory;
    }
  }

  private static List<Victim> exact(CallRow row, int w, List<Victim> open, ClusterIndex index) {
    int n = open.size();
    int bestMask = -1;
    double bestLost = Double.POSITIVE_INFINITY;
    int bestCount = Integer.MAX_VALUE;
    for (int mask = 1; mask < (1 << n); mask++) {
      Freed freed = new Freed(index, w, List.of());
      double lost = 0;
      for (int i = 0; i < n; i++) {
        if ((mask & (1 << i)) != 0) {
          Victim v = open.get(i);
          freed.add(v);
          lost += v.lost;
        }
      }
      int count = Integer.bitCount(mask);
      if (freed.fits(row)
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
    sorted.sort((a, b) -> Double.compare(a.lost / perGpu(a), b.lost / perGpu(b)));
    List<Victim> set = new ArrayList<>();
    Freed freed = new Freed(index, w, List.of());
    for (Victim v : sorted) {
      if (freed.fits(row)) {
        return set;
      }
      set.add(v);
      freed.add(v);
    }
    return freed.fits(row) ? set : null;
  }

  private static double perGpu(Victim v) {
    return v.eighths > 0 ? v.call.gpuShare() : Math.max(1, v.call.gpus());
  }
}
