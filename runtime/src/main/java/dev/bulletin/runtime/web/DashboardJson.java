package dev.bulletin.runtime.web;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.bulletin.protocol.ClusterStatus;
import dev.bulletin.protocol.PoolState;
import dev.bulletin.protocol.QueuedTask;
import dev.bulletin.protocol.WorkerStatus;
import dev.bulletin.runtime.api.StatusReport;
import dev.bulletin.runtime.control.ControlPlane;
import dev.bulletin.runtime.identity.Identity;
import dev.bulletin.runtime.metrics.ClusterMeters;
import dev.bulletin.runtime.metrics.GpuHistory;
import dev.bulletin.runtime.scheduler.policy.GroupQuota;
import dev.bulletin.runtime.scheduler.snapshot.Usage;
import dev.bulletin.runtime.task.Task;
import dev.bulletin.runtime.task.TaskState;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import java.time.Instant;
import java.util.HashMap;
import java.util.Map;
import java.util.TreeSet;

/**
 * The dashboard's JSON, built for one viewer on the control plane's event loop. What calls it
 * shows follows the gRPC status exactly ({@link StatusReport#build}, {@link
 * StatusReport#visibleTo}): a user sees their own calls' ids and names, and only counts of the
 * others'; the owner and admins see every call. Usage rows follow the same rule: a user sees
 * their own row and their group's.
 */
final class DashboardJson {
  private static final ObjectMapper JSON = new ObjectMapper();
  /** Queued calls the page lists (with their reasons); the rest of a long queue are counted. */
  static final int LISTED = 100;

  private final ControlPlane plane;
  private final StatusReport status;
  private final MeterRegistry registry;
  private final GpuHistory history;
  private final long historyIntervalMillis;

  DashboardJson(ControlPlane plane, StatusReport status, MeterRegistry registry,
      GpuHistory history, long historyIntervalMillis) {
    this.plane = plane;
    this.status = status;
    this.registry = registry;
    this.history = history;
    this.historyIntervalMillis = historyIntervalMillis;
  }

  ObjectNode whoami(Identity viewer) {
    return JSON.createObjectNode().put("user", viewer.user()).put("group", viewer.group())
        .put("sees_all", viewer.seesAll());
  }

  /** Cluster now: workers and their GPUs, running and queued calls, pools. */
  ObjectNode status(Identity viewer) {
    ClusterStatus report = status.build(viewer, LISTED);
    ObjectNode root = JSON.createObjectNode().put("cluster_id", report.getClusterId())
        .put("user", viewer.user()).put("sees_all", viewer.seesAll())
        .put("now", System.currentTimeMillis() / 1000.0);
    ArrayNode workers = root.putArray("workers");
    for (WorkerStatus worker : report.getWorkersList()) {
      ObjectNode row = workers.addObject().put("id", worker.getWorkerId())
          .put("host", worker.getHost()).put("pool", worker.getPool())
          .put("state", worker.getState()).put("simulated_gpus", worker.getSimulatedGpus())
          .put("executors", worker.getExecutors())
          .put("idle_executors", worker.getIdleExecutors());
      ObjectNode gpus = row.putObject("gpus").put("total", worker.getGpus().getTotal())
          .put("reserved", worker.getGpus().getReserved())
          .put("reserved_share", worker.getGpus().getReservedShare())
          .put("running", worker.getGpus().getBusy());
      gpus.set("busy", number(busyGpus(worker.getWorkerId())));
      // GPUs fractional calls share: index to the share held, e.g. {"0": 0.75}.
      ObjectNode shares = gpus.putObject("shared");
      worker.getGpuSharesMap().forEach((gpu, share) -> shares.put(Integer.toString(gpu), share));
      row.putObject("cpus").put("total", worker.getCpus().getTotal())
          .put("reserved", worker.getCpus().getReserved());
      worker.getGpuNamesList().forEach(row.withArray("gpu_names")::add);
    }
    root.putObject("gpus").put("total", report.getGpus().getTotal())
        .put("reserved", report.getGpus().getReserved())
        .put("reserved_share", report.getGpus().getReservedShare())
        .put("running", report.getGpus().getBusy());
    ArrayNode running = root.putArray("running");
    int othersRunning = 0;
    int runningNotListed = 0;
    for (Task task : plane.tasks().all()) {
      if (task.state() != TaskState.RUNNING && task.state() != TaskState.PLACED) {
        continue;
      }
      if (!StatusReport.visibleTo(viewer, task)) {
        othersRunning++;
        continue;
      }
      if (running.size() >= LISTED) {
        runningNotListed++;
        continue;
      }
      running.addObject().put("task_id", task.id()).put("name", task.name())
          .put("user", task.owner().user()).put("state", task.state().name().toLowerCase())
          .put("worker", task.workerId()).put("gpus", task.demand().gpuShare())
          .put("qos", task.qos()).set("started_at", task.startedAt() == null ? null
              : JSON.getNodeFactory().numberNode(task.startedAt().toEpochMilli() / 1000.0));
    }
    root.put("others_running", othersRunning).put("running_not_listed", runningNotListed);
    ArrayNode queue = root.putArray("queue");
    for (QueuedTask task : report.getQueueList()) {
      queue.addObject().put("position", task.getPosition()).put("task_id", task.getTaskId())
          .put("name", task.getName()).put("user", task.getUser())
          .put("gpus", task.getResources().getGpus()).put("reason", task.getReason())
          .set("estimated_start", task.getEstimatedStart() > 0
              ? JSON.getNodeFactory().numberNode(task.getEstimatedStart()) : null);
    }
    root.put("others_queued", report.getOthersQueued()).put("not_listed", report.getNotListed());
    ArrayNode pools = root.putArray("pools");
    for (PoolState pool : report.getPoolsList()) {
      ObjectNode row = pools.addObject().put("name", pool.getName())
          .put("provider", pool.getProvider()).put("starting", pool.getStarting())
          .put("idle", pool.getIdle()).put("busy", pool.getBusy())
          .put("draining", pool.getDraining()).put("max_workers", pool.getMaxWorkers());
      ArrayNode members = row.putArray("workers");
      report.getWorkersList().stream().filter(worker -> worker.getPool().equals(pool.getName()))
          .forEach(worker -> members.add(worker.getWorkerId()));
    }
    report.getPoolEventsList().forEach(root.putArray("pool_events")::add);
    return root;
  }

  /** Groups against their quotas and credits, and users' recent GPU use (fair share). */
  ObjectNode usage(Identity viewer) {
    Usage usage = plane.usage();
    Map<String, Double> held = new HashMap<>();
    for (Task task : plane.tasks().all()) {
      if (task.state() == TaskState.RUNNING || task.state() == TaskState.PLACED) {
        held.merge(task.owner().group(), task.demand().gpuShare(), Double::sum);
      }
    }
    TreeSet<String> groups = new TreeSet<>(plane.policyConfig().groups().keySet());
    groups.addAll(usage.groups().keySet());
    groups.addAll(held.keySet());
    ObjectNode root = JSON.createObjectNode();
    ArrayNode groupRows = root.putArray("groups");
    for (String group : groups) {
      if (!viewer.seesAll() && !group.equals(viewer.group())) {
        continue;
      }
      GroupQuota quota = plane.policyConfig().group(group);
      Usage.GroupUsage used = usage.group(group);
      groupRows.addObject().put("name", group).put("gpus_held", held.getOrDefault(group, 0.0))
          .<ObjectNode>set("max_gpus", quota.limitsGpus()
              ? JSON.getNodeFactory().numberNode(quota.maxGpus()) : null)
          .put("gpu_hours", used.gpuHoursThisPeriod())
          .<ObjectNode>set("gpu_hours_quota", number(quota.gpuHoursPerPeriod()))
          .<ObjectNode>set("period_ends", used.periodEndsAt().equals(Instant.MAX) ? null
              : JSON.getNodeFactory().numberNode(used.periodEndsAt().toEpochMilli() / 1000.0))
          .put("credits", used.credits());
    }
    ArrayNode users = root.putArray("users");
    new TreeSet<>(usage.users().keySet()).stream()
        .filter(user -> viewer.seesAll() || user.equals(viewer.user()))
        .forEach(user -> users.addObject().put("name", user)
            .put("recent_gpu_hours", usage.userRecentGpuSeconds(user) / 3600));
    return root;
  }

  /** The time chart: GPUs total, reserved and busy (null: no utilisation sample) over time. */
  ObjectNode history() {
    ObjectNode root = JSON.createObjectNode()
        .put("interval_seconds", historyIntervalMillis / 1000.0);
    ArrayNode samples = root.putArray("samples");
    boolean busySampled = false;
    for (GpuHistory.Sample sample : history.samples()) {
      ArrayNode row = samples.addArray().add(sample.atMillis() / 1000.0).add(sample.total())
          .add(sample.reserved());
      if (Double.isNaN(sample.busy())) {
        row.addNull();
      } else {
        row.add(sample.busy());
        busySampled = true;
      }
    }
    return root.put("busy_sampled", busySampled);
  }

  /** The usage ledger's utilisation gauge of a worker, NaN when it has none. */
  private double busyGpus(String workerId) {
    Gauge gauge = registry.find(ClusterMeters.GPUS).tag("worker", workerId).tag("state", "busy")
        .gauge();
    return gauge == null ? Double.NaN : gauge.value();
  }

  /** A number, or null for NaN and infinity (JSON has neither). */
  private static com.fasterxml.jackson.databind.JsonNode number(double value) {
    return Double.isFinite(value) ? JSON.getNodeFactory().numberNode(value)
        : JSON.getNodeFactory().nullNode();
  }
}
