package dev.bulletin.runtime.control;

import dev.bulletin.runtime.scheduler.ClusterCapacity;
import dev.bulletin.runtime.scheduler.WorkerCapacity;
import dev.bulletin.runtime.workers.AttachedWorker;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * What "could this call ever run" compares against: the capacities of the attached workers
 * (draining ones too) and of the workers pools could start. Kept from one change of either to
 * the next: every submit asks, and building it anew walked every worker for each call (at
 * 1,000 workers, 8 % of the event loop's time). A worker's capacity never changes while it is
 * attached.
 */
final class ClusterShapes {
  private final Map<String, AttachedWorker> workers;
  private List<WorkerCapacity> potential = List.of();
  /** Null until asked for after a change. */
  private ClusterCapacity all;

  /** @param workers the control plane's attached workers, read here, never changed */
  ClusterShapes(Map<String, AttachedWorker> workers) {
    this.workers = workers;
  }

  /** A worker attached or went away. */
  void workersChanged() {
    all = null;
  }

  void potential(List<WorkerCapacity> shapes) {
    potential = List.copyOf(shapes);
    all = null;
  }

  /** Every attached worker's capacity and every potential one's. */
  ClusterCapacity all() {
    if (all == null) {
      List<WorkerCapacity> capacities = new ArrayList<>(workers.size() + potential.size());
      for (AttachedWorker worker : workers.values()) {
        capacities.add(worker.slots().capacity());
      }
      capacities.addAll(potential);
      all = ClusterCapacity.of(capacities);
    }
    return all;
  }

  /** The capacities of the workers that take calls now (attached, not draining): not kept, as
   *  draining changes it and only a call the policy refuses asks. */
  ClusterCapacity open() {
    List<WorkerCapacity> open = new ArrayList<>(workers.size());
    for (AttachedWorker worker : workers.values()) {
      if (worker.drainReason() == null) {
        open.add(worker.slots().capacity());
      }
    }
    return ClusterCapacity.of(open);
  }
}
