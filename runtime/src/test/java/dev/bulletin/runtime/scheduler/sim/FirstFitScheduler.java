package dev.bulletin.runtime.scheduler.sim;

import dev.bulletin.runtime.scheduler.ClusterCapacity;
import dev.bulletin.runtime.scheduler.ClusterScheduler;
import dev.bulletin.runtime.scheduler.Demand;
import dev.bulletin.runtime.scheduler.Feasibility;
import dev.bulletin.runtime.scheduler.WorkerSlots;
import java.time.Clock;
import java.util.List;

/**
 * The FIFO baseline the simulations compare the policy scheduler against: the first worker, in
 * registration order, with the GPUs, CPUs and memory free, and the lowest-numbered free GPUs on
 * it. No quotas, QoS, topology or preemption. "Never" is the production scheduler's own answer
 * ({@link ClusterScheduler#feasible}), so both refuse the same calls in the same words.
 */
final class FirstFitScheduler {
  private final ClusterScheduler feasibility = ClusterScheduler.create(Clock.systemUTC(), 0);

  Decision decide(Demand demand, List<WorkerSlots> workers) {
    // Feasibility first: a call no worker could ever run must fail now, not wait forever.
    if (feasibility.feasible(demand, ClusterCapacity.of(
        workers.stream().map(WorkerSlots::capacity).toList())) instanceof Feasibility.Infeasible
        never) {
      return new Decision.Infeasible(never.reason());
    }
    for (WorkerSlots worker : workers) {
      if (worker.fitsNow(demand)) {
        return new Decision.Placed(worker.workerId(), worker.lowestFreeGpus(demand.gpus()));
      }
    }
    return new Decision.Wait(WorkerSlots.whyNoneFitsNow(demand, workers));
  }
}
