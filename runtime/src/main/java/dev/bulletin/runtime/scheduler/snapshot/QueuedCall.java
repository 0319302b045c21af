package dev.bulletin.runtime.scheduler.snapshot;

import dev.bulletin.runtime.scheduler.Demand;
import java.time.Duration;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A call waiting to be placed. Built with {@link #builder()}.
 *
 * @param qos its QoS class; "" means the policy's default class
 * @param priority orders this user's own calls (higher first); it never moves a call ahead of
 *     other users' calls, credits do that
 * @param creditsSpent credits the user offers to raise this call's priority (an urgent run);
 *     charged to the group's balance when the call is placed
 * @param inputs argument objects it reads, id to size in bytes (data locality)
 * @param walltime how long it may run; {@link Duration#ZERO} means its QoS's maximum
 * @param preferredWorker the worker that keeps the resident values it reads (issue 29), or ""
 * @param residentSession the key of the notebook session whose GPU state the call reads and
 *     keeps (the cell's call in the session's executor), or "": the same key as in
 *     {@link WorkerState#residentGpus}. A GPU keeping this key's state is the call's own: it
 *     takes it first when free (no copy). A GPU keeping another key's state is someone
 *     else's: the call avoids it when another free GPU fits as well. A call with "" (a plain
 *     call, or a mapped cell's other calls, which keep nothing) avoids every GPU with state.
 * @param keptLive values it reads are live (not spilled) in an executor of
 *     {@code preferredWorker}: it can read them only there, so it runs there or waits (a value
 *     on a GPU moves only once spilled, and an executor spills only when idle)
 */
public record QueuedCall(
    String id,
    String user,
    String group,
    String qos,
    Demand demand,
    int priority,
    long creditsSpent,
    Map<String, Long> inputs,
    Instant submittedAt,
    Duration walltime,
    String preferredWorker,
    String residentSession,
    boolean keptLive) {

  public QueuedCall {
    if (id == null || id.isBlank()) {
      throw new IllegalArgumentException("queued call id is required");
    }
    if (user == null || group == null || demand == null || submittedAt == null) {
      throw new IllegalArgumentException("queued call " + id
          + ": user, group, demand and submittedAt are required");
    }
    qos = qos == null ? "" : qos;
    if (creditsSpent < 0) {
      throw new IllegalArgumentException("queued call " + id + ": creditsSpent must be >= 0, got "
          + creditsSpent);
    }
    inputs = inputs == null ? Map.of() : Map.copyOf(inputs);
    walltime = walltime == null ? Duration.ZERO : walltime;
    preferredWorker = preferredWorker == null ? "" : preferredWorker;
    residentSession = residentSession == null ? "" : residentSession;
    if (keptLive && preferredWorker.isEmpty()) {
      throw new IllegalArgumentException("queued call " + id
          + ": keptLive needs the preferredWorker that keeps its values");
    }
    if (walltime.isNegative()) {
      throw new IllegalArgumentException("queued call " + id + ": walltime must be >= 0");
    }
  }

  /** A call whose values, if any, can be read wherever it runs. */
  public QueuedCall(String id, String user, String group, String qos, Demand demand,
      int priority, long creditsSpent, Map<String, Long> inputs, Instant submittedAt,
      Duration walltime, String preferredWorker, String residentSession) {
    this(id, user, group, qos, demand, priority, creditsSpent, inputs, submittedAt, walltime,
        preferredWorker, residentSession, false);
  }

  /** A call that reads no session's GPU state (as before issue 29's GPU preference). */
  public QueuedCall(String id, String user, String group, String qos, Demand demand,
      int priority, long creditsSpent, Map<String, Long> inputs, Instant submittedAt,
      Duration walltime, String preferredWorker) {
    this(id, user, group, qos, demand, priority, creditsSpent, inputs, submittedAt, walltime,
        preferredWorker, "");
  }

  /**
   * A queued call field by field; {@link Builder#build} validates it. Unset: the default QoS,
   * 0 GPUs, 1 CPU, no memory, priority 0, no credits, no inputs, the QoS's walltime.
   */
  public static Builder builder() {
    return new Builder();
  }

  /** Mutable, one call at a time; tests start from one with test defaults and change a field. */
  public static final class Builder {
    private String id;
    private String user;
    private String group;
    private String qos = "";
    private int gpus;
    private int gpuEighths;
    private double cpus = 1;
    private long memoryBytes;
    private int priority;
    private long creditsSpent;
    private Map<String, Long> inputs = Map.of();
    private Instant submittedAt;
    private Duration walltime = Duration.ZERO;
    private String preferredWorker = "";
    private String residentSession = "";
    private boolean keptLive;

    private Builder() {}

    public Builder id(String id) {
      this.id = id;
      return this;
    }

    public Builder user(String user) {
      this.user = user;
      return this;
    }

    public Builder group(String group) {
      this.group = group;
      return this;
    }

    public Builder qos(String qos) {
      this.qos = qos;
      return this;
    }

    /** Sets GPUs, CPUs and memory at once. */
    public Builder demand(Demand demand) {
      return gpus(demand.gpus()).cpus(demand.cpus()).memoryBytes(demand.memoryBytes())
          .gpuEighths(demand.gpuEighths());
    }

    public Builder gpus(int gpus) {
      this.gpus = gpus;
      return this;
    }

    /** A share of one GPU in eighths (1..7, with no whole GPUs); 0 for whole GPUs. */
    public Builder gpuEighths(int gpuEighths) {
      this.gpuEighths = gpuEighths;
      return this;
    }

    public Builder cpus(double cpus) {
      this.cpus = cpus;
      return this;
    }

    public Builder memoryBytes(long memoryBytes) {
      this.memoryBytes = memoryBytes;
      return this;
    }

    public Builder priority(int priority) {
      this.priority = priority;
      return this;
    }

    public Builder creditsSpent(long creditsSpent) {
      this.creditsSpent = creditsSpent;
      return this;
    }

    /** One argument object it reads (adds to those already set). */
    public Builder input(String objectId, long bytes) {
      Map<String, Long> more = new LinkedHashMap<>(inputs);
      more.put(objectId, bytes);
      inputs = more;
      return this;
    }

    /** Its argument objects, id to size (replaces those already set; not copied until build). */
    public Builder inputs(Map<String, Long> inputs) {
      this.inputs = inputs;
      return this;
    }

    public Builder submittedAt(Instant submittedAt) {
      this.submittedAt = submittedAt;
      return this;
    }

    public Builder walltime(Duration walltime) {
      this.walltime = walltime;
      return this;
    }

    public Builder preferredWorker(String preferredWorker) {
      this.preferredWorker = preferredWorker;
      return this;
    }

    /** The key of the session whose GPU state it reads ({@link QueuedCall#residentSession}). */
    public Builder residentSession(String residentSession) {
      this.residentSession = residentSession;
      return this;
    }

    /** Values it reads are live on {@link #preferredWorker}'s GPUs ({@link QueuedCall#keptLive}). */
    public Builder keptLive(boolean keptLive) {
      this.keptLive = keptLive;
      return this;
    }

    public QueuedCall build() {
      return new QueuedCall(id, user, group, qos, new Demand(gpus, cpus, memoryBytes, gpuEighths),
          priority,
          creditsSpent, inputs, submittedAt, walltime, preferredWorker, residentSession,
          keptLive);
    }
  }
}
