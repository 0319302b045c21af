package dev.bulletin.runtime.scheduler;

import dev.bulletin.runtime.scheduler.policy.PolicyConfig;
import dev.bulletin.runtime.scheduler.policy.PolicyYaml;
import dev.bulletin.runtime.scheduler.snapshot.GpuTopology;
import dev.bulletin.runtime.scheduler.snapshot.QueuedCall;
import dev.bulletin.runtime.scheduler.snapshot.RunningCall;
import dev.bulletin.runtime.scheduler.snapshot.Snapshot;
import dev.bulletin.runtime.scheduler.snapshot.Usage;
import dev.bulletin.runtime.scheduler.snapshot.WorkerState;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

/**
 * Fluent builders for scheduler tests: {@code aWorker().gpus(8).nvlinkPairs(0, 1)},
 * {@code aCall().user("ann").group("nlp").gpus(2).qos("interactive")}, and a snapshot that
 * takes running calls' GPUs, CPUs and memory off their workers, as the runtime would.
 */
public final class Builders {
  public static final Instant NOW = Instant.parse("2025-03-03T09:00:00Z");
  public static final Clock CLOCK = Clock.fixed(NOW, ZoneOffset.UTC);
  public static final long GIB = 1L << 30;

  private static int nextId;

  private Builders() {}

  public static WorkerBuilder aWorker() {
    return new WorkerBuilder("w" + nextId++);
  }

  public static CallBuilder aCall() {
    return new CallBuilder("c" + nextId++);
  }

  public static RunningBuilder aRunningCall() {
    return new RunningBuilder("r" + nextId++);
  }

  public static SnapshotBuilder aSnapshot() {
    return new SnapshotBuilder();
  }

  public static ClusterScheduler scheduler() {
    return ClusterScheduler.create(CLOCK, 42, () -> 0L);
  }

  public static PolicyConfig policy(String yaml) {
    return PolicyYaml.parse(yaml);
  }

  public static final class WorkerBuilder {
    private String id;
    private String pool = "";
    private int gpus = 8;
    private GpuTopology.Builder topology = GpuTopology.builder(8);
    private TreeSet<Integer> free;
    private double cpus = 64;
    private long memory = 512 * GIB;
    private final Map<String, Long> held = new HashMap<>();
    private boolean draining;
    private Instant expiresAt = WorkerState.NEVER;

    WorkerBuilder(String id) {
      this.id = id;
    }

    public WorkerBuilder id(String id) {
      this.id = id;
      return this;
    }

    public WorkerBuilder pool(String pool) {
      this.pool = pool;
      return this;
    }

    public WorkerBuilder gpus(int gpus) {
      this.gpus = gpus;
      this.topology = GpuTopology.builder(gpus);
      return this;
    }

    public WorkerBuilder nvlinkPairs(int... flatPairs) {
      topology.nvlinkPairs(flatPairs);
      return this;
    }

    public WorkerBuilder pcieSwitch(int... ids) {
      topology.pcieSwitch(ids);
      return this;
    }

    public WorkerBuilder nvlinkAll() {
      topology.all(GpuTopology.Link.NVLINK);
      return this;
    }

    /** Only these GPUs are free (the others are held by calls the test does not list). */
    public WorkerBuilder free(Integer... ids) {
      this.free = new TreeSet<>(List.of(ids));
      return this;
    }

    public WorkerBuilder cpus(double cpus) {
      this.cpus = cpus;
      return this;
    }

    public WorkerBuilder memoryGiB(long gib) {
      this.memory = gib * GIB;
      return this;
    }

    public WorkerBuilder holds(String objectId, long bytes) {
      held.put(objectId, bytes);
      return this;
    }

    public WorkerBuilder draining() {
      this.draining = true;
      return this;
    }

    public WorkerBuilder expiresIn(Duration left) {
      this.expiresAt = NOW.plus(left);
      return this;
    }

    String id() {
      return id;
    }

    WorkerState build(List<RunningCall> running) {
      TreeSet<Integer> freeGpus = new TreeSet<>();
      if (free != null) {
        freeGpus.addAll(free);
      } else {
        for (int i = 0; i < gpus; i++) {
          freeGpus.add(i);
        }
      }
      double freeCpus = cpus;
      long freeMemory = memory;
      for (RunningCall call : running) {
        if (call.workerId().equals(id)) {
          freeGpus.removeAll(call.gpuIds());
          freeCpus -= call.cpus();
          freeMemory -= call.memoryBytes();
        }
      }
      return new WorkerState(id, pool, topology.build(), freeGpus, cpus, Math.max(0, freeCpus),
          memory, Math.max(0, freeMemory), held, draining, expiresAt);
    }
  }

  public static final class CallBuilder {
    private String id;
    private String user = "ann";
    private String group = "nlp";
    private String qos = "";
    private int gpus = 1;
    private double cpus = 1;
    private long memory;
    private String pool = "";
    private int priority;
    private long credits;
    private final Map<String, Long> inputs = new LinkedHashMap<>();
    private Instant submittedAt = NOW.minusSeconds(60);
    private Duration walltime = Duration.ZERO;

    CallBuilder(String id) {
      this.id = id;
    }

    public CallBuilder id(String id) {
      this.id = id;
      return this;
    }

    public CallBuilder user(String user) {
      this.user = user;
      return this;
    }

    public CallBuilder group(String group) {
      this.group = group;
      return this;
    }

    public CallBuilder qos(String qos) {
      this.qos = qos;
      return this;
    }

    public CallBuilder gpus(int gpus) {
      this.gpus = gpus;
      return this;
    }

    public CallBuilder cpus(double cpus) {
      this.cpus = cpus;
      return this;
    }

    public CallBuilder memoryGiB(long gib) {
      this.memory = gib * GIB;
      return this;
    }

    public CallBuilder pool(String pool) {
      this.pool = pool;
      return this;
    }

    public CallBuilder priority(int priority) {
      this.priority = priority;
      return this;
    }

    public CallBuilder credits(long credits) {
      this.credits = credits;
      return this;
    }

    public CallBuilder input(String objectId, long bytes) {
      inputs.put(objectId, bytes);
      return this;
    }

    public CallBuilder submittedSecondsAgo(long seconds) {
      this.submittedAt = NOW.minusSeconds(seconds);
      return this;
    }

    public CallBuilder walltime(Duration walltime) {
      this.walltime = walltime;
      return this;
    }

    public QueuedCall build() {
      return new QueuedCall(id, user, group, qos, new Demand(gpus, cpus, memory), pool, priority,
          credits, inputs, submittedAt, walltime);
    }
  }

  public static final class RunningBuilder {
    private String id;
    private String user = "bob";
    private String group = "vision";
    private String qos = "batch";
    private String worker = "w?";
    private List<Integer> gpus = List.of();
    private double cpus = 1;
    private long memory;
    private boolean preemptible;
    private Instant startedAt = NOW.minus(Duration.ofMinutes(10));
    private Duration walltime = Duration.ofHours(1);
    private Duration unsaved;
    private String preemptedFor = "";

    RunningBuilder(String id) {
      this.id = id;
    }

    public RunningBuilder id(String id) {
      this.id = id;
      return this;
    }

    public RunningBuilder user(String user) {
      this.user = user;
      return this;
    }

    public RunningBuilder group(String group) {
      this.group = group;
      return this;
    }

    public RunningBuilder qos(String qos) {
      this.qos = qos;
      return this;
    }

    public RunningBuilder on(String workerId, Integer... gpuIds) {
      this.worker = workerId;
      this.gpus = List.of(gpuIds);
      return this;
    }

    public RunningBuilder cpus(double cpus) {
      this.cpus = cpus;
      return this;
    }

    public RunningBuilder preemptible() {
      this.preemptible = true;
      return this;
    }

    public RunningBuilder startedAgo(Duration ago) {
      this.startedAt = NOW.minus(ago);
      return this;
    }

    public RunningBuilder walltime(Duration walltime) {
      this.walltime = walltime;
      return this;
    }

    public RunningBuilder unsaved(Duration unsaved) {
      this.unsaved = unsaved;
      return this;
    }

    public RunningBuilder preemptedFor(String callId) {
      this.preemptedFor = callId;
      return this;
    }

    public RunningCall build() {
      return new RunningCall(id, user, group, qos, worker, gpus, cpus, memory, preemptible,
          startedAt, walltime, unsaved != null ? unsaved : Duration.between(startedAt, NOW),
          preemptedFor);
    }
  }

  public static final class SnapshotBuilder {
    private final List<WorkerBuilder> workers = new ArrayList<>();
    private final List<RunningBuilder> running = new ArrayList<>();
    private final List<CallBuilder> queue = new ArrayList<>();
    private final Map<String, Usage.GroupUsage> groups = new HashMap<>();
    private final Map<String, Double> users = new HashMap<>();
    private PolicyConfig policy = PolicyConfig.defaults();

    public SnapshotBuilder workers(WorkerBuilder... builders) {
      workers.addAll(List.of(builders));
      return this;
    }

    public SnapshotBuilder running(RunningBuilder... builders) {
      running.addAll(List.of(builders));
      return this;
    }

    public SnapshotBuilder queue(CallBuilder... builders) {
      queue.addAll(List.of(builders));
      return this;
    }

    public SnapshotBuilder policy(PolicyConfig policy) {
      this.policy = policy;
      return this;
    }

    public SnapshotBuilder policy(String yaml) {
      return policy(PolicyYaml.parse(yaml));
    }

    public SnapshotBuilder groupUsage(String group, double recentGpuSeconds, double gpuHours,
        double credits) {
      groups.put(group, new Usage.GroupUsage(recentGpuSeconds, gpuHours, credits,
          NOW.plus(Duration.ofDays(2))));
      return this;
    }

    public SnapshotBuilder userUsage(String user, double recentGpuSeconds) {
      users.put(user, recentGpuSeconds);
      return this;
    }

    public Snapshot build() {
      List<RunningCall> calls = running.stream().map(RunningBuilder::build).toList();
      return new Snapshot(workers.stream().map(w -> w.build(calls)).toList(), calls,
          queue.stream().map(CallBuilder::build).toList(), new Usage(groups, users), policy);
    }
  }
}
