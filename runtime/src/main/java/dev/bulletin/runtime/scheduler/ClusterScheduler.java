package dev.bulletin.runtime.scheduler;

import dev.bulletin.runtime.scheduler.impl.PolicyScheduler;
import dev.bulletin.runtime.scheduler.plan.Plan;
import dev.bulletin.runtime.scheduler.snapshot.Snapshot;
import java.time.Clock;
import java.util.function.LongSupplier;

/**
 * The policy scheduler: one pass over a {@link Snapshot} of the cluster and its queue returns a
 * {@link Plan} of placements, preemptions, waits with reasons, and refusals. Pure: no Vert.x, no
 * I/O; the clock, the randomness (a seed) and the ticker that times decisions are injected, so a
 * pass is deterministic for a given snapshot, clock reading and seed.
 */
public interface ClusterScheduler {

  Plan plan(Snapshot snapshot);

  /**
   * Could a call that asks for {@code demand} ever run on {@code cluster}, its workers idle? The
   * one answer to "never, for lack of capacity": the runtime asks it at submit, before it fails
   * a refused call and for the status; a pass asks it of its usable workers.
   */
  Feasibility feasible(Demand demand, ClusterCapacity cluster);

  /** The production scheduler: the stage chain of {@link PolicyScheduler}. */
  static ClusterScheduler create(Clock clock, long seed) {
    return new PolicyScheduler(clock, seed, System::nanoTime);
  }

  /** As {@link #create(Clock, long)}, timing decisions with {@code ticker} (nanoseconds). */
  static ClusterScheduler create(Clock clock, long seed, LongSupplier ticker) {
    return new PolicyScheduler(clock, seed, ticker);
  }
}
