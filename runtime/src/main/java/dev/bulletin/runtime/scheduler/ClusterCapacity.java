package dev.bulletin.runtime.scheduler;

import java.util.Collection;
import java.util.LinkedHashSet;
import java.util.List;

/**
 * The cluster as feasibility sees it: the distinct capacities of its workers (in the order they
 * were first seen) and how many workers there are. A thousand workers of one shape are one
 * shape, so "can this call ever run" costs a handful of comparisons.
 */
public record ClusterCapacity(List<WorkerCapacity> shapes, int workers) {
  public static final ClusterCapacity EMPTY = new ClusterCapacity(List.of(), 0);

  public ClusterCapacity {
    shapes = List.copyOf(shapes);
    if (workers < shapes.size()) {
      throw new IllegalArgumentException("a cluster of " + workers + " workers cannot have "
          + shapes.size() + " distinct shapes");
    }
  }

  public static ClusterCapacity of(Collection<WorkerCapacity> workers) {
    return new ClusterCapacity(List.copyOf(new LinkedHashSet<>(workers)), workers.size());
  }
}
