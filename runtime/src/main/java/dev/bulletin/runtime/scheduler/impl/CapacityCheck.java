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
        + " in the cluster)" + (demand.gpusTouched() > 0 && largest.gpus() == 0 ? NO_GPUS_HINT : ""));
  }

  /**
   * Said when a GPU call meets a cluster with no GPU at all: most often a first try on a laptop
   * or a CPU VM, where simulated GPUs let the researcher's {@code @bulletin.gpu} code run as is.
   */
  static final String NO_GPUS_HINT = "; this cluster has no GPUs: on a machine without GPUs,"
      + " start it with `bulletin up --simulate-gpus N` to run GPU calls on N simulated GPUs";
}
