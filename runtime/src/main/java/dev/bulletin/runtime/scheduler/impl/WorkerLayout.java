package dev.bulletin.runtime.scheduler.impl;

import dev.bulletin.runtime.scheduler.snapshot.GpuTopology;
import dev.bulletin.runtime.scheduler.snapshot.WorkerState;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

/**
 * What a pass's {@link ClusterIndex} takes from which workers there are, not from what they have
 * free: the seeded order, the index of each id, and the GPU distances. It changes only when a
 * worker attaches or leaves (or reports another topology), so the scheduler keeps the last one
 * and a pass over the same workers reuses it: built anew, the id map alone was a fifth of the
 * runtime's event loop at 1,000 workers. Immutable once built, so passes on several threads may
 * share it.
 */
final class WorkerLayout {
  /** Each index position's place in the snapshot's worker list. */
  final int[] fromSnapshot;
  final Map<String, Integer> byId;
  /** Per index position; workers of one topology share one matrix. */
  final byte[][] distances;
  /** The largest GPU count of any worker. */
  final int maxGpus;
  /** The snapshot's ids and topologies, in its order: what {@link #fits} compares. */
  private final String[] ids;
  private final GpuTopology[] topologies;

  private WorkerLayout(List<WorkerState> workers, long seed) {
    int size = workers.size();
    fromSnapshot = new int[size];
    for (int i = 0; i < size; i++) {
      fromSnapshot[i] = i;
    }
    SplittableRandom random = new SplittableRandom(seed);
    for (int i = size - 1; i > 0; i--) {
      int j = random.nextInt(i + 1);
      int swap = fromSnapshot[i];
      fromSnapshot[i] = fromSnapshot[j];
      fromSnapshot[j] = swap;
    }
    ids = new String[size];
    topologies = new GpuTopology[size];
    byId = new HashMap<>(size * 4 / 3 + 1);  // sized once: a pass at 1,000 workers rehashed it 8 times
    distances = new byte[size][];
    Map<GpuTopology, byte[]> shared = new HashMap<>();
    int largest = 0;
    for (int w = 0; w < size; w++) {
      WorkerState worker = workers.get(fromSnapshot[w]);
      if (byId.put(worker.id(), w) != null) {
        throw new IllegalArgumentException("snapshot: worker id '" + worker.id() + "' appears twice");
      }
      distances[w] = shared.computeIfAbsent(worker.topology(), WorkerLayout::matrix);
      largest = Math.max(largest, worker.gpus());
    }
    maxGpus = largest;
    for (int i = 0; i < size; i++) {
      ids[i] = workers.get(i).id();
      topologies[i] = workers.get(i).topology();
    }
  }

  /**
   * The layout of {@code workers}: {@code last} if it was made for the same workers in the same
   * order with the same topologies (the shuffle then comes out the same), else a new one.
   */
  static WorkerLayout of(List<WorkerState> workers, long seed, WorkerLayout last) {
    return last != null && last.fits(workers) ? last : new WorkerLayout(workers, seed);
  }

  private boolean fits(List<WorkerState> workers) {
    if (workers.size() != ids.length) {
      return false;
    }
    for (int i = 0; i < ids.length; i++) {
      WorkerState worker = workers.get(i);
      // Identity first: the runtime hands the same id and topology objects pass after pass.
      if (!ids[i].equals(worker.id())
          || topologies[i] != worker.topology() && !topologies[i].equals(worker.topology())) {
        return false;
      }
    }
    return true;
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
}
