package dev.bulletin.runtime.scheduler.impl;

import dev.bulletin.runtime.scheduler.snapshot.GpuTopology;
import dev.bulletin.runtime.scheduler.snapshot.WorkerState;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

/**
 * The pass's working copy of the workers' free capacity, indexed so a decision touches few
 * workers: usable workers (not draining) sit in buckets by pool and by free GPU count, and a call
 * for g GPUs looks in buckets g, g+1, ... (best fit first) instead of scanning the cluster.
 * Worker order inside a bucket is a seeded shuffle of the snapshot's order, so ties spread
 * across workers the same way for the same seed.
 */
final class ClusterIndex {
  final WorkerState[] workers;
  final int size;
  final long[] freeMask;
  final int[] freeCount;
  final int[] gpuCount;
  final double[] freeCpus;
  final long[] freeMemory;
  final long[] expiresMillis;
  final int[] pool;
  final boolean[] usable;
  final byte[][] distances;
  final Names pools = new Names();
  final Map<String, Integer> byId = new HashMap<>();
  /** The largest GPU count of any worker: buckets run 0..maxGpus. */
  final int maxGpus;
  /** Per pool, the distinct (GPUs, CPUs, memory) capacities of usable workers. */
  final List<List<Shape>> shapes = new ArrayList<>();
  private final IntBag[][] buckets;
  private final int[] bucketSlot;
  private final Map<String, int[]> holders = new HashMap<>();

  ClusterIndex(List<WorkerState> snapshotWorkers, long seed) {
    List<WorkerState> shuffled = new ArrayList<>(snapshotWorkers);
    SplittableRandom random = new SplittableRandom(seed);
    for (int i = shuffled.size() - 1; i > 0; i--) {
      int j = random.nextInt(i + 1);
      WorkerState swap = shuffled.get(i);
      shuffled.set(i, shuffled.get(j));
      shuffled.set(j, swap);
    }
    size = shuffled.size();
    workers = shuffled.toArray(new WorkerState[0]);
    freeMask = new long[size];
    freeCount = new int[size];
    gpuCount = new int[size];
    freeCpus = new double[size];
    freeMemory = new long[size];
    expiresMillis = new long[size];
    pool = new int[size];
    usable = new boolean[size];
    distances = new byte[size][];
    bucketSlot = new int[size];
    Map<GpuTopology, byte[]> shared = new HashMap<>();
    int largest = 0;
    for (int w = 0; w < size; w++) {
      WorkerState worker = workers[w];
      if (byId.put(worker.id(), w) != null) {
        throw new IllegalArgumentException("snapshot: worker id '" + worker.id() + "' appears twice");
      }
      freeMask[w] = worker.freeGpuMask();
      freeCount[w] = Long.bitCount(freeMask[w]);
      gpuCount[w] = worker.gpus();
      freeCpus[w] = worker.freeCpus();
      freeMemory[w] = worker.freeMemoryBytes();
      expiresMillis[w] = worker.expiresAt().equals(WorkerState.NEVER) ? Long.MAX_VALUE
          : worker.expiresAt().toEpochMilli();
      pool[w] = pools.id(worker.pool());
      usable[w] = !worker.draining();
      distances[w] = shared.computeIfAbsent(worker.topology(), ClusterIndex::matrix);
      largest = Math.max(largest, worker.gpus());
    }
    maxGpus = largest;
    buckets = new IntBag[pools.size()][largest + 1];
    for (int p = 0; p < pools.size(); p++) {
      for (int f = 0; f <= largest; f++) {
        buckets[p][f] = new IntBag();
      }
    }
    List<java.util.Set<Shape>> distinct = new ArrayList<>();
    for (int p = 0; p < pools.size(); p++) {
      distinct.add(new java.util.LinkedHashSet<>());
    }
    for (int w = 0; w < size; w++) {
      if (usable[w]) {
        bucketSlot[w] = buckets[pool[w]][freeCount[w]].add(w);
        distinct.get(pool[w]).add(new Shape(gpuCount[w], workers[w].cpus(),
            workers[w].memoryBytes()));
      }
    }
    for (java.util.Set<Shape> set : distinct) {
      shapes.add(List.copyOf(set));
    }
  }

  /** A worker's whole capacity: what "could this ever fit" compares against. */
  record Shape(int gpus, double cpus, long memory) {}

  /** Usable workers in the pool (any pool for ANY_POOL). */
  int usableWorkers(int p) {
    int count = 0;
    for (int q = 0; q < pools.size(); q++) {
      if (p == CallRow.ANY_POOL || q == p) {
        for (int f = 0; f <= maxGpus; f++) {
          count += buckets[q][f].size();
        }
      }
    }
    return count;
  }

  private static byte[] matrix(GpuTopology topology) {
    int n = topology.gpus();
    byte[] matrix = new byte[n * n];
    for (int a = 0; a < n; a++) {
      for (int b = 0; b < n; b++) {
        matrix[a * n + b] = (byte) topology.distance(a, b);
      }
    }
    return matrix;
  }

  int poolCount() {
    return pools.size();
  }

  /** Workers of pool {@code p} with exactly {@code free} GPUs free. */
  IntBag bucket(int p, int free) {
    return buckets[p][free];
  }

  /** Most GPUs free on one usable worker of the pool (any pool for ANY_POOL); -1 if none. */
  int maxFree(int p) {
    int best = -1;
    for (int q = 0; q < pools.size(); q++) {
      if (p != CallRow.ANY_POOL && q != p) {
        continue;
      }
      for (int f = maxGpus; f > best; f--) {
        if (buckets[q][f].size() > 0) {
          best = f;
          break;
        }
      }
    }
    return best;
  }

  /** Takes GPUs, CPUs and memory of worker {@code w} for a placed call. */
  void take(int w, long gpus, double cpus, long memory) {
    if (usable[w]) {
      buckets[pool[w]][freeCount[w]].remove(bucketSlot[w], this);
    }
    freeMask[w] &= ~gpus;
    freeCount[w] = Long.bitCount(freeMask[w]);
    freeCpus[w] -= cpus;
    freeMemory[w] -= memory;
    if (usable[w]) {
      bucketSlot[w] = buckets[pool[w]][freeCount[w]].add(w);
    }
  }

  void moved(int w, int slot) {
    bucketSlot[w] = slot;
  }

  /**
   * Workers whose store holds {@code objectId}: one scan of the workers per object a pass asks
   * about, cached for the pass (most passes ask about few objects; indexing every held object up
   * front would cost every pass).
   */
  int[] holders(String objectId) {
    int[] found = holders.get(objectId);
    if (found == null) {
      int count = 0;
      int[] scan = new int[size];
      for (int w = 0; w < size; w++) {
        if (workers[w].heldObjects().containsKey(objectId)) {
          scan[count++] = w;
        }
      }
      found = java.util.Arrays.copyOf(scan, count);
      holders.put(objectId, found);
    }
    return found;
  }

  /** An unordered set of worker indices with O(1) add and remove (swap with the last). */
  static final class IntBag {
    private int[] items = new int[4];
    private int size;

    int add(int item) {
      if (size == items.length) {
        items = java.util.Arrays.copyOf(items, size * 2);
      }
      items[size] = item;
      return size++;
    }

    void remove(int slot, ClusterIndex index) {
      size--;
      if (slot != size) {
        items[slot] = items[size];
        index.moved(items[slot], slot);
      }
    }

    int size() {
      return size;
    }

    int get(int i) {
      return items[i];
    }
  }
}
