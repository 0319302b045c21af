package dev.bulletin.runtime.api;

import dev.bulletin.runtime.control.ControlPlane;
import dev.bulletin.runtime.identity.Identity;
import dev.bulletin.runtime.workers.AttachedWorker;
import dev.bulletin.runtime.workers.PoolRunner;
import dev.bulletin.runtime.workers.RemoteWorkerLink;
import dev.bulletin.protocol.ClusterStatus;
import dev.bulletin.protocol.PoolState;
import dev.bulletin.protocol.QueuedTask;
import dev.bulletin.protocol.Resources;
import dev.bulletin.protocol.SlotCounts;
import dev.bulletin.protocol.WorkerStatus;
import dev.bulletin.runtime.pool.PoolStatus;
import dev.bulletin.runtime.scheduler.Feasibility;
import dev.bulletin.runtime.scheduler.plan.WaitInfo;
import dev.bulletin.runtime.scheduler.WorkerSlots;
import dev.bulletin.runtime.task.Task;
import dev.bulletin.runtime.task.TaskState;
import dev.bulletin.worker.WorkerStatusView;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/** Builds the cluster's status: slots total / reserved / busy per worker, and the queue with reasons. */
public final class StatusReport {
  private final ControlPlane plane;
  private final String clusterId;
  private final PoolRunner pools;

  /** @param pools the pools' runner, or null when the config has none */
  public StatusReport(ControlPlane plane, String clusterId, PoolRunner pools) {
    this.plane = plane;
    this.clusterId = clusterId;
    this.pools = pools;
  }

  /**
   * Why a queued call waits: what the last pass told its caller, else (a call no pass explained
   * yet: just queued, or beyond its user's window) the scheduler's feasibility and what the
   * workers have free now.
   */
  private String reason(Task task) {
    WaitInfo explained = task.waitInfo();
    if (explained != null) {
      return explained.reason();
    }
    if (plane.feasibility(task.demand()) instanceof Feasibility.Infeasible never) {
      return never.reason();
    }
    List<WorkerSlots> slots = plane.allSlots();
    if (slots.stream().noneMatch(worker -> worker.fitsNow(task.demand()))) {
      return WorkerSlots.whyNoneFitsNow(task.demand(), slots);
    }
    double now = System.currentTimeMillis() / 1000.0;
    if (AttachedWorker.whereItCanFinish(task, plane.workers(), now, plane.drainMarginSeconds())
        .stream()
        .noneMatch(worker -> worker.capacity().fits(task.demand()))) {
      return "every worker that could run it is draining: its allocation ends before the call"
          + " could finish (a replacement is on its way if the worker belongs to a pool)";
    }
    return "waiting for its turn: calls ahead of it in the queue go first";
  }

  /**
   * The status as {@code viewer} may see it: every worker and slot count, but only their own
   * queued calls (with their global positions) unless they are the owner or an admin; the calls
   * of others are only counted.
   */
  public ClusterStatus build(Identity viewer) {
    return build(viewer, Integer.MAX_VALUE);
  }

  /**
   * The status with at most {@code listed} of the viewer's queued calls described (a waiting
   * call's reason costs a feasibility check: a page polled every few seconds lists the first
   * ones of a queue of thousands, and counts the rest in {@code not_listed}).
   */
  public ClusterStatus build(Identity viewer, int listed) {
    Map<String, java.util.Set<Integer>> busyGpus = new HashMap<>();
    Map<String, double[]> busyCpus = new HashMap<>();
    for (Task task : plane.tasks().all()) {
      if (task.state() == TaskState.RUNNING && task.workerId() != null) {
        // A GPU shared by several running fractional calls is one busy GPU.
        busyGpus.computeIfAbsent(task.workerId(), id -> new java.util.TreeSet<>())
            .addAll(task.gpuIds());
        busyCpus.computeIfAbsent(task.workerId(), id -> new double[1])[0] += task.demand().cpus();
      }
    }
    double now = System.currentTimeMillis() / 1000.0;
    ClusterStatus.Builder status = ClusterStatus.newBuilder().setClusterId(clusterId)
        .setRunning(plane.runningCount());
    SlotCounts.Builder gpuTotals = SlotCounts.newBuilder();
    SlotCounts.Builder cpuTotals = SlotCounts.newBuilder();
    for (AttachedWorker worker : plane.workers()) {
      WorkerSlots slots = worker.slots();
      SlotCounts gpus = SlotCounts.newBuilder().setTotal(slots.gpus())
          .setReserved(slots.gpus() - slots.freeGpuCount())
          .setReservedShare(slots.reservedGpuShare())
          .setBusy(busyGpus.getOrDefault(worker.id(), java.util.Set.of()).size()).build();
      SlotCounts cpus = SlotCounts.newBuilder().setTotal((int) slots.cpus())
          .setReserved((int) Math.ceil(slots.cpus() - slots.freeCpus() - 1e-9))
          .setBusy((int) Math.ceil(busyCpus.getOrDefault(worker.id(), new double[1])[0] - 1e-9))
          .build();
      WorkerStatusView executors = worker.link().status();
      status.addWorkers(WorkerStatus.newBuilder().setWorkerId(worker.id()).setHost(worker.host())
          .setPool(worker.pool()).setRemote(worker.remote())
          .setProviderHandle(worker.providerHandle()).setExpiresAt(worker.expiresAt())
          .setState(dev.bulletin.runtime.workers.EmbeddedWorker.STARTING.equals(
              worker.drainReason()) ? "starting" : worker.drainReason() != null
              || worker.draining(now, plane.drainMarginSeconds()) ? "draining" : "ready")
          .setGpus(gpus).setCpus(cpus).setMemoryBytes(slots.memoryBytes())
          .setSimulatedGpus(slots.simulatedGpus()).setExecutors(executors.executors())
          .setIdleExecutors(executors.idleExecutors()).addAllGpuNames(worker.gpuNames())
          .putAllGpuShares(slots.sharedGpus())
          .setKeptObjects(plane.objects().keptOn(worker.id()))
          .setStoreReferenced(worker.link() instanceof RemoteWorkerLink remote
              ? remote.storeReferenced() : 0));
      add(gpuTotals, gpus);
      add(cpuTotals, cpus);
    }
    status.setGpus(gpuTotals).setCpus(cpuTotals);
    if (pools != null) {
      for (PoolStatus pool : pools.status()) {
        status.addPools(PoolState.newBuilder().setName(pool.pool())
            .setProvider(pool.provider().name().toLowerCase(java.util.Locale.ROOT))
            .setStarting(pool.starting()).setIdle(pool.idle()).setBusy(pool.busy())
            .setDraining(pool.draining()).setMaxWorkers(pool.maxWorkers())
            .setBackoffUntil(pool.backoffUntil().map(at -> at.toEpochMilli() / 1000.0).orElse(0.0))
            .setProblem(pool.problem().orElse("")));
      }
      pools.recentEvents().forEach(event -> status.addPoolEvents(event.toString()));
    }
    int position = 0;
    int hidden = 0;
    int notListed = 0;
    for (Task task : plane.tasks().queuedView()) {
      position++;
      if (!visibleTo(viewer, task)) {
        hidden++;
        continue;
      }
      if (status.getQueueCount() >= listed) {
        notListed++;
        continue;
      }
      QueuedTask.Builder queued = QueuedTask.newBuilder().setTaskId(task.id())
          .setName(task.name()).setUser(task.owner().user()).setPosition(position)
          .setReason(reason(task)).setResources(Resources.newBuilder()
              .setGpus(task.demand().gpus()).setGpuEighths(task.demand().gpuEighths())
              .setCpus(task.demand().cpus())
              .setMemoryBytes(task.demand().memoryBytes()));
      if (task.waitInfo() != null) {
        task.waitInfo().eta().ifPresent(eta -> queued.setEstimatedStart(eta.toEpochMilli() / 1000.0));
      }
      status.addQueue(queued);
    }
    return status.setOthersQueued(hidden).setNotListed(notListed).build();
  }

  /**
   * Whether {@code viewer} may see this call's id, name and details: their own calls, and
   * everyone's for the owner and admins. The one rule of every view of calls (status, dashboard).
   */
  public static boolean visibleTo(Identity viewer, Task task) {
    return viewer.seesAll() || task.owner().user().equals(viewer.user());
  }

  private static void add(SlotCounts.Builder total, SlotCounts one) {
    total.setTotal(total.getTotal() + one.getTotal())
        .setReserved(total.getReserved() + one.getReserved())
        .setReservedShare(total.getReservedShare() + one.getReservedShare())
        .setBusy(total.getBusy() + one.getBusy());
  }
}
