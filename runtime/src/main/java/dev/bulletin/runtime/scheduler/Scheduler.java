package dev.bulletin.runtime.scheduler;

import java.util.List;

/**
 * Chooses where a call runs. Pure: no Vert.x, no I/O; it reads worker slots and decides. The
 * control plane applies a {@link Decision.Placed} by reserving the slots it names.
 */
public interface Scheduler {

  Decision decide(Demand demand, List<WorkerSlots> workers);
}
