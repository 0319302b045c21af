package dev.bulletin.runtime.control;

import dev.bulletin.runtime.objects.ObjectDirectory;
import dev.bulletin.runtime.scheduler.WorkerSlots;
import dev.bulletin.runtime.scheduler.snapshot.WorkerState;
import dev.bulletin.runtime.workers.AttachedWorker;
import java.time.Instant;
import java.util.Collection;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;

/**
 * The attached workers as the scheduler sees them, kept between passes the way the Kubernetes
 * scheduler keeps its node snapshot: a worker's {@link WorkerState} is built again only when its
 * {@link AttachedWorker#generation} or its held objects ({@link ObjectDirectory#heldVersion})
 * moved. Most passes change a few workers, and copying every worker's free GPUs and held objects
 * each pass made the pass's cost grow with the cluster. Kept by worker object, not id: one that
 * left and attached again under its id is a new object whose counters start from zero again.
 * Owned by the control plane's event loop.
 */
final class WorkerStates {

  /** A worker's state and the counters it was built at. */
  private record Kept(long generation, long heldVersion, WorkerState state) {}

  /** The last pass's workers, in its order, and what was kept of each. */
  private AttachedWorker[] order = new AttachedWorker[0];
  private Kept[] kept = new Kept[0];

  /** {@code workers}' states, in their order; an immutable list (the snapshot takes it as is). */
  List<WorkerState> of(Collection<AttachedWorker> workers, ObjectDirectory objects) {
    AttachedWorker[] now = workers.toArray(new AttachedWorker[0]);
    Kept[] keptNow = new Kept[now.length];
    WorkerState[] states = new WorkerState[now.length];
    Map<AttachedWorker, Kept> moved = null;  // built only when workers attached or left since
    for (int i = 0; i < now.length; i++) {
      AttachedWorker worker = now[i];
      Kept last;
      if (i < order.length && order[i] == worker) {
        last = kept[i];
      } else {
        moved = moved != null ? moved : lastByWorker();
        last = moved.get(worker);
      }
      long generation = worker.generation();
      long heldVersion = objects.heldVersion(worker.id());
      if (last == null || last.generation() != generation || last.heldVersion() != heldVersion) {
        last = new Kept(generation, heldVersion, stateOf(worker, objects));
      }
      keptNow[i] = last;
      states[i] = last.state();
    }
    order = now;
    kept = keptNow;
    return List.of(states);
  }

  private Map<AttachedWorker, Kept> lastByWorker() {
    Map<AttachedWorker, Kept> byWorker = new IdentityHashMap<>();
    for (int i = 0; i < order.length; i++) {
      byWorker.put(order[i], kept[i]);
    }
    return byWorker;
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
