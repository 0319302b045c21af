package dev.bulletin.runtime.impl;

import dev.bulletin.protocol.ClusterStatus;
import dev.bulletin.protocol.QueuedTask;
import dev.bulletin.protocol.Resources;
import dev.bulletin.protocol.SlotCounts;
import dev.bulletin.protocol.WorkerStatus;
import dev.bulletin.runtime.scheduler.Decision;
import dev.bulletin.runtime.scheduler.WorkerSlots;
import dev.bulletin.runtime.task.Task;
import dev.bulletin.runtime.task.TaskState;
import dev.bulletin.worker.WorkerStatusView;
import java.util.List;

/** Builds the cluster's status: slots total / reserved / busy, and the queue with reasons. */
final class StatusReport {
  private final ControlPlane plane;
  private final String clusterId;
  private final String host;

  StatusReport(ControlPlane plane, String clusterId, String host) {
    this.plane = plane;
    this.clusterId = clusterId;
    this.host = host;
  }

  /** Why a queued call waits, asked of the scheduler now (passes stop early and keep none). */
  private String reason(Task task) {
    Decision decision = plane.scheduler().decide(task.demand(), List.of(plane.slots()));
    if (decision instanceof Decision.Wait wait) {
      return wait.reason();
    }
    return decision instanceof Decision.Infeasible infeasible ? infeasible.reason()
        : "waiting for its turn: calls ahead of it in the queue go first";
  }

  ClusterStatus build() {
    WorkerSlots slots = plane.slots();
    List<Task> tasks = List.copyOf(plane.tasks().all());
    int busyGpus = 0;
    double busyCpus = 0;
    for (Task task : tasks) {
      if (task.state() == TaskState.RUNNING) {
        busyGpus += task.demand().gpus();
        busyCpus += task.demand().cpus();
      }
    }
    SlotCounts gpus = SlotCounts.newBuilder().setTotal(slots.gpus())
        .setReserved(slots.gpus() - slots.freeGpuCount()).setBusy(busyGpus).build();
    SlotCounts cpus = SlotCounts.newBuilder().setTotal((int) slots.cpus())
        .setReserved((int) Math.ceil(slots.cpus() - slots.freeCpus() - 1e-9))
        .setBusy((int) Math.ceil(busyCpus - 1e-9)).build();
    WorkerStatusView executors = plane.agent().status();
    WorkerStatus worker = WorkerStatus.newBuilder().setWorkerId(slots.workerId()).setHost(host)
        .setGpus(gpus).setCpus(cpus).setMemoryBytes(slots.memoryBytes())
        .setSimulatedGpus(slots.simulatedGpus()).setExecutors(executors.executors())
        .setIdleExecutors(executors.idleExecutors())
        .addAllGpuNames(plane.agent().options().gpus().names()).build();
    ClusterStatus.Builder status = ClusterStatus.newBuilder().setClusterId(clusterId)
        .addWorkers(worker).setGpus(gpus).setCpus(cpus).setRunning(plane.runningCount());
    int position = 0;
    for (Task task : plane.tasks().queued()) {
      status.addQueue(QueuedTask.newBuilder().setTaskId(task.id()).setName(task.name())
          .setUser(task.owner().user()).setPosition(++position).setReason(reason(task))
          .setResources(Resources.newBuilder().setGpus(task.demand().gpus())
              .setCpus(task.demand().cpus()).setMemoryBytes(task.demand().memoryBytes())));
    }
    return status.build();
  }
}
