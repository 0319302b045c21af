package dev.bulletin.runtime.scheduler.sim;

import dev.bulletin.runtime.scheduler.snapshot.GpuTopology;
import java.util.LinkedHashMap;
import java.util.Map;

/** A simulated worker: fixed capacity, what is free now, and a small LRU object store. */
final class SimWorker {
  final String id;
  final GpuTopology topology;
  final double cpus;
  final long memory;
  long freeMask;
  double freeCpus;
  long freeMemory;
  /** Bumped on every change, so a driver can reuse its last snapshot of an unchanged worker. */
  int version;
  /** The worker's store: objects its calls read stay, least recently used evicted first. */
  final Map<String, Long> held;
  /**
   * GPUs that keep a notebook session's state, GPU to session key, as the agent would report
   * them (filled by {@link ResidentSessions} when the scheduler is told; bump {@link #version}).
   */
  final Map<Integer, String> resident = new java.util.HashMap<>();

  SimWorker(String id, GpuTopology topology, double cpus, long memory, int storeObjects) {
    this.id = id;
    this.topology = topology;
    this.cpus = cpus;
    this.memory = memory;
    this.freeMask = topology.gpus() == 64 ? -1L : (1L << topology.gpus()) - 1;
    this.freeCpus = cpus;
    this.freeMemory = memory;
    this.held = new LinkedHashMap<>(16, 0.75f, true) {
      @Override
      protected boolean removeEldestEntry(Map.Entry<String, Long> eldest) {
        return size() > storeObjects;
      }
    };
  }

  /** A standard 8-GPU box: NVLink pairs 0-1, 2-3, 4-5, 6-7; PCIe switches 0-3 and 4-7. */
  static GpuTopology dgxLike() {
    return GpuTopology.builder(8).nvlinkPairs(0, 1, 2, 3, 4, 5, 6, 7)
        .pcieSwitch(0, 1, 2, 3).pcieSwitch(4, 5, 6, 7).build();
  }

  /** The closest farthest-pair distance any {@code gpus} GPUs of this box can have. */
  static int bestDistance(GpuTopology topology, int gpus) {
    int n = topology.gpus();
    int best = Integer.MAX_VALUE;
    for (int mask = 0; mask < (1 << n); mask++) {
      if (Integer.bitCount(mask) == gpus) {
        best = Math.min(best, maxDistance(topology, mask));
      }
    }
    return best;
  }

  static int maxDistance(GpuTopology topology, long mask) {
    int max = 0;
    for (int a = 0; a < topology.gpus(); a++) {
      for (int b = a + 1; b < topology.gpus(); b++) {
        if ((mask >> a & 1) != 0 && (mask >> b & 1) != 0) {
          max = Math.max(max, topology.distance(a, b));
        }
      }
    }
    return max;
  }
}
