package dev.bulletin.runtime.scheduler.impl;

import dev.bulletin.runtime.scheduler.ClusterCapacity;
import dev.bulletin.runtime.scheduler.Demand;
import dev.bulletin.runtime.scheduler.WorkerCapacity;
import dev.bulletin.runtime.scheduler.snapshot.WorkerState;
import java.util.ArrayList;
import java.util.List;

/**
 * Each worker's row of a pass's {@link ClusterIndex} as its {@link WorkerState} gives it, before
 * the pass takes anything, in the layout's order. A row is carried over from the last pass's
 * when the snapshot holds the very same WorkerState object (the runtime hands the same one until
 * the worker changes: control.WorkerStates) and computed only for the others, so a pass pays for
 * the workers that changed since the last, not for the cluster. Immutable once built: the index
 * copies what it changes ({@link ClusterIndex#take}), so passes on several threads may share it.
 */
final class WorkerRows {
  final WorkerLayout layout;
  final WorkerState[] states;
  final long[] freeMask;
  final int[] gpuCount;
  final double[] freeCpus;
  final long[] freeMemory;
  final long[] expiresMillis;
  final boolean[] usable;
  final long[] stateMask;
  /** Per worker and GPU, 8 eighths on a free GPU and 0 on a taken one; shared, never written. */
  final byte[][] shareFree;
  final ClusterCapacity capacity;

  private WorkerRows(List<WorkerState> snapshot, WorkerLayout layout, WorkerRows last) {
    this.layout = layout;
    int size = snapshot.size();
    // Copied whole (a few kilobytes at 1,000 workers), then only the changed rows computed.
    states = last != null ? last.states.clone() : new WorkerState[size];
    freeMask = last != null ? last.freeMask.clone() : new long[size];
    gpuCount = last != null ? last.gpuCount.clone() : new int[size];
    freeCpus = last != null ? last.freeCpus.clone() : new double[size];
    freeMemory = last != null ? last.freeMemory.clone() : new long[size];
    expiresMillis = last != null ? last.expiresMillis.clone() : new long[size];
    usable = last != null ? last.usable.clone() : new boolean[size];
    stateMask = last != null ? last.stateMask.clone() : new long[size];
    shareFree = last != null ? last.shareFree.clone() : new byte[size][];
    boolean sameCapacity = last != null;
    for (int w = 0; w < size; w++) {
      WorkerState worker = snapshot.get(layout.fromSnapshot[w]);
      if (states[w] == worker) {
        continue;
      }
      WorkerState before = states[w];
      boolean wasUsable = usable[w];
      states[w] = worker;
      computeRow(worker, w);
      sameCapacity &= before != null && wasUsable == usable[w] && sameShape(before, worker);
    }
    capacity = sameCapacity ? last.capacity : capacityOf();
  }

  /**
   * The rows of {@code snapshot} in {@code layout}'s order, carrying over {@code last}'s where
   * the worker's state is the same object. {@code last} counts only if made for {@code layout}.
   */
  static WorkerRows of(List<WorkerState> snapshot, WorkerLayout layout, WorkerRows last) {
    return new WorkerRows(snapshot, layout, last != null && last.layout == layout ? last : null);
  }

  private void computeRow(WorkerState worker, int w) {
    freeMask[w] = worker.freeGpuMask();
    gpuCount[w] = worker.gpus();
    freeCpus[w] = worker.freeCpus();
    freeMemory[w] = worker.freeMemoryBytes();
    expiresMillis[w] = worker.expiresAt().equals(WorkerState.NEVER) ? Long.MAX_VALUE
        : worker.expiresAt().toEpochMilli();
    usable[w] = !worker.draining();
    stateMask[w] = 0;
    if (!worker.residentGpus().isEmpty()) {  // almost never: skip the iterator
      for (int gpu : worker.residentGpus().keySet()) {
        stateMask[w] |= 1L << gpu;
      }
    }
    shareFree[w] = new byte[gpuCount[w]];
    for (int g = 0; g < gpuCount[w]; g++) {
      shareFree[w][g] = (byte) ((freeMask[w] & (1L << g)) != 0 ? Demand.EIGHTHS : 0);
    }
  }

  /** What the cluster's capacity reads of a worker did not change. */
  private static boolean sameShape(WorkerState before, WorkerState now) {
    return before.gpus() == now.gpus() && before.cpus() == now.cpus()
        && before.memoryBytes() == now.memoryBytes();
  }

  /** The usable workers' whole capacities: what "could this ever fit" compares against. */
  private ClusterCapacity capacityOf() {
    List<WorkerCapacity> capacities = new ArrayList<>(states.length);
    for (int w = 0; w < states.length; w++) {
      if (usable[w]) {
        capacities.add(new WorkerCapacity(gpuCount[w], false, states[w].cpus(),
            states[w].memoryBytes()));
      }
    }
    return ClusterCapacity.of(capacities);
  }
}
