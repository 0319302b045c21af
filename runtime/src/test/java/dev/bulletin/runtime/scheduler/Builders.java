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
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

/**
 * Fluent builders for scheduler tests: {@code aWorker().gpus(8).nvlinkPairs(0, 1)},
 * {@code aCall().user("ann").group("nlp").gpus(2).qos("interactive")}, and a snapshot that
 * takes running calls' GPUs, CPUs and memory off their workers, as the runtime would. Calls are
 * the main code's own builders ({@link QueuedCall#builder}, {@link RunningCall#builder}) with
 * test defaults filled in.
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

  /** A 1-GPU call of ann (group nlp) in the default QoS, queued a minute ago. */
  public static QueuedCall.Builder aCall() {
    return QueuedCall.builder().id("c" + nextId++).user("ann").group("nlp").gpus(1).cpus(1)
        .submittedAt(secondsAgo(60));
  }

  /**
   * A batch call of bob (group vision) started 10 minutes ago with a 1-hour walltime and no
   * checkpoint since; {@code on(worker, gpus...)} says where it runs.
   */
  public static RunningCall.Builder aRunningCall() {
    return RunningCall.builder().id("r" + nextId++).user("bob").group("vision").qos("batch")
        .on("w?").startedAt(NOW.minus(Duration.ofMinutes(10))).walltime(Duration.ofHours(1))
        .savedAt(NOW.minus(Duration.ofMinutes(10)));
  }

  public static Instant secondsAgo(long seconds) {
    return NOW.minusSeconds(seconds);
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
    private int gpus = 8;
    private GpuTopology.Builder topology = GpuTopology.builder(8);
    private TreeSet<Integer> free;
    private double cpus = 64;
    private long memory = 512 * GIB;
    private final Map<String, Long> held = new HashMap<>();
    private boolean draining;
    private Instant expiresAt = WorkerState.NEVER;
    private final Map<Integer, String> resident = new HashMap<>();

    WorkerBuilder(String id) {
      this.id = id;
    }

    public WorkerBuilder id(String id) {
      this.id = id;
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

    public WorkerBuilder memoryBytes(long bytes) {
      this.memory = bytes;
      return this;
    }

    public WorkerBuilder holds(String objectId, long bytes) {
      held.put(objectId, bytes);
      return this;
    }

    /** These GPUs keep {@code session}'s state between its cells (issue 29). */
    public WorkerBuilder keeps(String session, Integer... gpus) {
      for (int gpu : gpus) {
        resident.put(gpu, session);
      }
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
      return new WorkerState(id, topology.build(), freeGpus, cpus, Math.max(0, freeCpus),
          memory, Math.max(0, freeMemory), held, draining, expiresAt, resident);
    }
  }

  public static final class SnapshotBuilder {
    private final List<WorkerBuilder> workers = new ArrayList<>();
    private final List<RunningCall.Builder> running = new ArrayList<>();
    private final List<QueuedCall.Builder> queue = new ArrayList<>();
    private final Map<String, Usage.GroupUsage> groups = new HashMap<>();
    private final Map<String, Double> users = new HashMap<>();
    private PolicyConfig policy = PolicyConfig.defaults();
    private boolean explain = true;

    /** A snapshot whose plan explains no waiting call (Snapshot#explainWaiting). */
    public SnapshotBuilder withoutExplanations() {
      explain = false;
      return this;
    }

    public SnapshotBuilder workers(WorkerBuilder... builders) {
      workers.addAll(List.of(builders));
      return this;
    }

    public SnapshotBuilder running(RunningCall.Builder... builders) {
      running.addAll(List.of(builders));
      return this;
    }

    public SnapshotBuilder queue(QueuedCall.Builder... builders) {
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
      List<RunningCall> calls = running.stream().map(RunningCall.Builder::build).toList();
      return new Snapshot(workers.stream().map(w -> w.build(calls)).toList(), calls,
          queue.stream().map(QueuedCall.Builder::build).toList(), new Usage(groups, users),
          policy, explain);
    }
  }
}
