package dev.bulletin.runtime.scheduler.impl;

import dev.bulletin.runtime.scheduler.ClusterCapacity;
import dev.bulletin.runtime.scheduler.ClusterScheduler;
import dev.bulletin.runtime.scheduler.Demand;
import dev.bulletin.runtime.scheduler.Feasibility;
import dev.bulletin.runtime.scheduler.plan.Plan;
import dev.bulletin.runtime.scheduler.snapshot.Snapshot;
import java.time.Clock;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.LongSupplier;

/**
 * The policy scheduler. The stage chain is assembled here, and only here, in the order a call
 * meets it (like Nomad's feasibility stack). Each pass is a fresh {@link Pass} over the snapshot;
 * of the cluster only the last pass's {@link WorkerRows} (each worker's row as its state gave
 * it, and the {@link WorkerLayout} of which workers there are) survive between passes, read by
 * the next only for workers whose state is the same object. Stages read the pass through
 * {@link PassView} (call checks) or the worker index alone (filters, scores).
 */
public final class PolicyScheduler implements ClusterScheduler {

  /** The assembled chain; stateless, so passes may run on several threads at once. */
  record Stages(List<CallCheck> checks, WorkerFilter[] filters, WorkerScore[] scores,
      WaitExplainer explainer) {}

  private final Clock clock;
  private final long seed;
  private final LongSupplier ticker;
  private final Stages stages;
  /** The last pass's; immutable, so passes on several threads at once only race to replace it. */
  private final AtomicReference<WorkerRows> rows = new AtomicReference<>();

  public PolicyScheduler(Clock clock, long seed, LongSupplier ticker) {
    this.clock = java.util.Objects.requireNonNull(clock, "clock");
    this.seed = seed;
    this.ticker = ticker;
    this.stages = new Stages(
        List.of(
            // "Never" answers first and independent of load: an unknown QoS or a walltime over
            // the class's maximum fails at submit even on a full cluster. It reads the class the
            // pass resolved once for the call, and the walltime every later stage uses.
            new QosCheck(),
            // Still "never", against whole-worker capacity: a call no usable worker could run
            // when idle must not wait forever. Before the limits so an impossible call is
            // refused for what it is, not parked behind a quota. The same answer the runtime
            // gets from feasible().
            new CapacityCheck(),
            // The user's own profile (interns) before QoS and group: it has "never" answers of
            // its own (a call bigger than the profile), and a user at their own cap should not
            // borrow group capacity either.
            new UserLimitCheck(),
            // QoS concurrency per user: an O(1) counter, so a user at the cap costs nothing more.
            new QosLimitCheck(),
            // The group quota last but one: it does not always reject, it may mark the call
            // preemptible (borrowing), which every earlier check must not see.
            new GroupQuotaCheck(),
            // Only for calls that run preemptible, so after the quota stage has marked them:
            // they get lendable capacity only (what groups lend of their idle quota).
            new LendingCheck()),
        // Then the workers. Candidates come from buckets by free GPU count (draining workers
        // are in none), so the filters check only what buckets cannot; each rejection is
        // counted under its FilterReason. Shapes that found nothing stop early for the rest of
        // the pass; the preemption planner runs only after this fails.
        new WorkerFilter[] {
            // First: a worker that leaves before the walltime ends is turned down for that,
            // whatever it has free, so a call that only such workers could take waits for a
            // worker that stays up (WORKER_EXPIRY), not for capacity.
            WorkerFilter.STAYS_UP,
            // Then the resources the buckets do not index.
            WorkerFilter.CPUS,
            WorkerFilter.MEMORY,
            // Last: a worker reserved for an older big call is turned down only for a call
            // that could otherwise run there, so the wait names the reservation, not capacity.
            WorkerFilter.BACKFILL},
        // Weighted scores (policy weights) pick one of the candidates that passed.
        new WorkerScore[] {
            // A multi-GPU call's GPUs close together: the largest effect on its speed.
            WorkerScore.TOPOLOGY,
            // Inputs already in the worker's store need not travel.
            WorkerScore.LOCALITY,
            // The worker that keeps the GPU state the call reads (resident values) alone can
            // use it in place: as much as data locality.
            WorkerScore.RESIDENT,
            // Spilling another session's GPU state costs that session a restore: a small
            // preference, below data locality, for a worker where the call spills nobody's.
            WorkerScore.STATE_SPARED,
            // Best fit last: keeps whole workers free for big calls when nothing else decides.
            WorkerScore.PACKING},
        // Last, over what is left: positions, reasons, estimates and suggestions.
        new WaitExplainer());
  }

  /** A pass over the snapshot, not yet run (stage tests drive single stages through it). */
  Pass pass(Snapshot snapshot) {
    WorkerRows last = rows.get();
    WorkerLayout layout = WorkerLayout.of(snapshot.workers(), seed,
        last == null ? null : last.layout);
    WorkerRows now = WorkerRows.of(snapshot.workers(), layout, last);
    rows.set(now);
    return new Pass(snapshot, clock.instant(), now, ticker, stages);
  }

  @Override
  public Plan plan(Snapshot snapshot) {
    return pass(snapshot).run();
  }

  @Override
  public Feasibility feasible(Demand demand, ClusterCapacity cluster) {
    return CapacityCheck.feasibility(demand, cluster);
  }
}
