package dev.bulletin.runtime.scheduler;

import dev.bulletin.protocol.Text;
import java.util.Comparator;
import java.util.List;

/**
 * The first worker, in registration order, with the GPUs, CPUs and memory free. A stand-in that
 * keeps the {@link Scheduler} contract (named reasons, "never" apart from "not now") until the
 * policy scheduler with quotas, QoS and scoring replaces it.
 */
public final class FirstFitScheduler implements Scheduler {

  @Override
  public Decision decide(Demand demand, List<WorkerSlots> workers) {
    // Feasibility first: a call no worker could ever run must fail now, not wait forever.
    if (workers.stream().noneMatch(worker -> worker.couldEverFit(demand))) {
      return new Decision.Infeasible(infeasibleReason(demand, workers));
    }
    for (WorkerSlots worker : workers) {
      if (worker.fitsNow(demand)) {
        return new Decision.Placed(worker.workerId(), worker.lowestFreeGpus(demand.gpus()));
      }
    }
    return new Decision.Wait(waitReason(demand, workers));
  }

  private static String infeasibleReason(Demand demand, List<WorkerSlots> workers) {
    if (workers.isEmpty()) {
      return "no worker has joined the cluster";
    }
    WorkerSlots largest = workers.stream()
        .max(Comparator.comparingInt(WorkerSlots::gpus).thenComparingDouble(WorkerSlots::cpus))
        .orElseThrow();
    return "no worker can run a call that asks for " + demand + ": the largest worker has "
        + largest.describeCapacity() + " (" + Text.count(workers.size(), "worker") + " in the cluster)";
  }

  private static String waitReason(Demand demand, List<WorkerSlots> workers) {
    if (demand.gpus() > 0) {
      int mostFree = workers.stream().mapToInt(WorkerSlots::freeGpuCount).max().orElse(0);
      if (mostFree < demand.gpus()) {
        return "no worker has " + Text.count(demand.gpus(), "GPU") + " free (most free on one"
            + " worker: " + mostFree + ")";
      }
    }
    double mostCpus = workers.stream().mapToDouble(WorkerSlots::freeCpus).max().orElse(0);
    if (mostCpus < demand.cpus()) {
      return "no worker has " + Text.number(demand.cpus()) + " CPUs free (most free: "
          + Text.number(mostCpus) + ")";
    }
    return "no worker has " + Text.bytes(demand.memoryBytes()) + " memory free";
  }
}
