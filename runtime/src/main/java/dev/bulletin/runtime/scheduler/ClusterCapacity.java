package dev.bulletin.runtime.scheduler;

import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * The cluster as feasibility sees it: the distinct capacities of its workers (in the order they
 * were first seen) and how many workers there are. A thousand workers of one shape are one
 * shape, so "can this call ever run" costs a handful of comparisons.
 */
public record ClusterCapacity(List<WorkerCapacity> shapes, int workers) {
  public static final ClusterCapacity EMPTY = new ClusterCapacity(List.of(), 0);
  /** Past this many distinct shapes, {@link #of} looks a worker up in a set. */
  private static final int FEW_SHAPES = 16;

  public ClusterCapacity {
    shapes = List.copyOf(shapes);
    if (workers < shapes.size()) {
      throw new IllegalArgumentException("a cluster of " + workers + " workers cannot have "
          + shapes.size() + " distinct shapes");
    }
  }

  public static ClusterCapacity of(Collection<WorkerCapacity> workers) {
    // A cluster has a few shapes and many workers: comparing each worker with the shapes seen
    // so far costs less than hashing every worker (what a set did, per pass and per submit).
    List<WorkerCapacity> shapes = new ArrayList<>();
    Set<WorkerCapacity> many = null;
    for (WorkerCapacity worker : workers) {
      if (many != null ? many.add(worker) : !shapes.contains(worker)) {
        shapes.add(worker);
        if (many == null && shapes.size() > FEW_SHAPES) {
          many = new HashSet<>(shapes);
        }
      }
    }
    return new ClusterCapacity(shapes, workers.size());
  }
}
