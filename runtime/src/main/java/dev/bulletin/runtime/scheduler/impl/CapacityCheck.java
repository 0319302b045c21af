package dev.bulletin.runtime.scheduler.impl;

import dev.bulletin.protocol.Text;
import dev.bulletin.runtime.scheduler.ClusterCapacity;
import dev.bulletin.runtime.scheduler.Demand;
import dev.bulletin.runtime.scheduler.Feasibility;
import dev.bulletin.runtime.scheduler.WorkerCapacity;

/**
 * Some usable worker could run the call if it were idle; else "never". {@link #feasibility} is
 * the scheduler's one answer to "can this ever run here" ({@code ClusterScheduler#feasible}),
 * which the runtime also asks of its whole cluster. A pass with no usable worker at all is not
 * "never": a worker may join (the selection says so as a wait).
 */
final class CapacityCheck implements CallCheck {
  @Override
  public Verdict check(CallRow row, PassView pass) {
    ClusterCapacity usable = pass.index().capacity;
    if (usable.workers() == 0) {
      return Verdict.PASS;
    }
    return feasibility(row.call.demand(), usable) instanceof Feasibility.Infeasible never
        ? Verdict.never(never.reason()) : Verdict.PASS;
  }

  static Feasibility feasibility(Demand demand, ClusterCapacity cluster) {
    if (cluster.workers() == 0) {
      return new Feasibility.Infeasible("no worker has joined the cluster");
    }
    WorkerCapacity largest = null;
    for (WorkerCapacity shape : cluster.shapes()) {
      if (shape.fits(demand)) {
        return Feasibility.FEASIBLE;
      }
      if (largest == null || shape.gpus() > largest.gpus()
          || (shape.gpus() == largest.gpus() && shape.cpus() > largest.cpus())) {
        largest = shape;
      }
    }
    int workers = cluster.workers();
    return new Feasibility.Infeasible("no worker can run a call that asks for " + demand
        + ": the largest worker has " + largest + " (" + Text.count(workers, "worker")
        + " in the cluster)");
  }
}
