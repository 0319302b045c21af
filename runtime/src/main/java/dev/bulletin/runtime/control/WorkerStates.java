package dev.bulletin.runtime.control;

import dev.bulletin.runtime.objects.ObjectDirectory;
import dev.bulletin.runtime.scheduler.WorkerSlots;
import dev.bulletin.runtime.scheduler.snapshot.WorkerState;
import dev.bulletin.runtime.workers.AttachedWorker;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The attached workers as the scheduler sees them, kept between passes the way the Kubernetes
 * scheduler keeps its node snapshot: a worker's {@link WorkerState} is built again only when its
 * {@link AttachedWorker#generation} or its held objects ({@link ObjectDirectory#heldVersion})
 * moved. Most passes change a few workers, and copying every worker's free GPUs and held objects
 * each pass made the pass's cost grow with the cluster. Owned by the control plane's event loop.
 */
final class WorkerStates {

  /** A worker's state and what it was built from; the worker itself, so one that left and
   * attached again under its id (a new object, its counters from zero) is not matched. */
  private record Kept(AttachedWorker worker, long generation, long heldVersion,
      WorkerState state) {}

  private final Map<String, Kept> kept = new HashMap<>();

  /** {@code workers}' states, in their order. */
  List<WorkerState> of(Collection<AttachedWorker> workers, ObjectDirectory objects) {
    List<WorkerState> states = new ArrayList<>(workers.size());
    for (AttachedWorker worker : workers) {
      Kept last = kept.get(worker.id());
      long generation = worker.generation();
      long heldVersion = objects.heldVersion(worker.id());
      if (last == null || last.worker() != worker || last.generation() != generation
          || last.heldVersion() != heldVersion) {
        last = new Kept(worker, generation, heldVersion, stateOf(worker, objects));
        kept.put(worker.id(), last);
      }
      states.add(last.state());
    }
    if (kept.size() > workers.size()) {  // some left since: only then pay for the sweep
      Set<String> attached = new HashSet<>();
      workers.forEach(worker -> attached.add(worker.id()));
      kept.keySet().retainAll(attached);
    }
    return states;
  }

  private static WorkerState stateOf(AttachedWorker worker, ObjectDirectory objects) {
    WorkerSlots slots = worker.slots();
    return new WorkerState(worker.id(), worker.topology(), slots.freeGpuIds(), slots.cpus(),
        slots.freeCpus(), slots.memoryBytes(), slots.freeMemory(), objects.heldBy(worker.id()),
        worker.drainReason() != null, worker.expiresAt() > 0
            ? Instant.ofEpochMilli((long) (worker.expiresAt() * 1000)) : WorkerState.NEVER,
        worker.residentGpus().snapshot());
  }
}
