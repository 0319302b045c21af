package dev.bulletin.runtime.scheduler.sim;

import dev.bulletin.runtime.scheduler.Demand;
import dev.bulletin.runtime.scheduler.WorkerSlots;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The baseline: plain FIFO first-fit, {@link FirstFitScheduler} over
 * {@link WorkerSlots}, in submit order, no quotas, QoS, topology or preemption. One shortcut that
 * changes no decision: once a call for g GPUs found no worker, later calls for g or more GPUs in
 * the same pass are not asked (capacity only shrinks within a pass).
 */
final class FifoDriver extends BaseDriver {
  private final FirstFitScheduler scheduler = new FirstFitScheduler();
  private final List<WorkerSlots> slots = new ArrayList<>();
  private final Map<String, Integer> workerIndex = new HashMap<>();
  int infeasible;

  FifoDriver(Des des, List<SimWorker> workers, double passIntervalSeconds) {
    super(des, workers, passIntervalSeconds);
    for (int w = 0; w < workers.size(); w++) {
      SimWorker worker = workers.get(w);
      slots.add(new WorkerSlots(worker.id, worker.topology.gpus(), true, worker.cpus,
          worker.memory));
      workerIndex.put(worker.id, w);
    }
  }

  @Override
  void schedule() {
    int smallestFailed = Integer.MAX_VALUE;
    for (SimCall call : new ArrayList<>(queue.values())) {
      if (call.gpus >= smallestFailed) {
        continue;
      }
      Demand demand = new Demand(call.gpus, call.cpus, call.memory);
      Decision decision = scheduler.decide(demand, slots);
      if (decision instanceof Decision.Placed placed) {
        int w = workerIndex.get(placed.workerId());
        slots.get(w).reserve(demand, placed.gpuIds());
        long mask = 0;
        for (int gpu : placed.gpuIds()) {
          mask |= 1L << gpu;
        }
        start(call, w, mask, false);
      } else if (decision instanceof Decision.Infeasible) {
        queue.remove(call.id);
        call.infeasible = true;
        infeasible++;
        onDone.accept(call);
      } else {
        smallestFailed = Math.min(smallestFailed, call.gpus);
      }
    }
  }

  @Override
  void released(Running run) {
    List<Integer> ids = new ArrayList<>();
    for (int id : run.call.gpuIds) {
      ids.add(id);
    }
    slots.get(run.worker).free(new Demand(run.call.gpus, run.call.cpus, run.call.memory), ids);
  }
}
