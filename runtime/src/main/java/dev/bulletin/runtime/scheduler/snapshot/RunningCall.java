package dev.bulletin.runtime.scheduler.snapshot;

import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;

/**
 * A call holding GPUs now. Built with {@link #builder()}.
 *
 * @param preemptible it runs as preemptible: its QoS is preemptible, or it borrowed idle
 *     capacity over its group's quota. Only such calls are ever chosen as victims, and they do
 *     not count against the group's concurrent-GPU quota.
 * @param savedAt when its work was last saved: its start, or its last checkpoint (the runtime
 *     knows which); what it did since is lost if it is stopped. A moment rather than a duration
 *     keeps the call the same from one pass to the next (the runtime keeps it between passes)
 * @param preemptedFor the queued call it is being stopped for ("" if none); a call already being
 *     stopped is not chosen again, and its beneficiary waits for it instead of planning anew
 * @param gpuEighths a fractional call's share of its one GPU in eighths (1..7); 0 when it holds
 *     its GPUs whole
 */
public record RunningCall(
    String id,
    String user,
    String group,
    String qos,
    String workerId,
    List<Integer> gpuIds,
    double cpus,
    long memoryBytes,
    boolean preemptible,
    Instant startedAt,
    Duration walltime,
    Instant savedAt,
    String preemptedFor,
    int gpuEighths) {

  public RunningCall {
    if (id == null || id.isBlank()) {
      throw new IllegalArgumentException("running call id is required");
    }
    if (user == null || group == null || qos == null || workerId == null || startedAt == null
        || walltime == null) {
      throw new IllegalArgumentException("running call " + id
          + ": user, group, qos, workerId, startedAt and walltime are required");
    }
    gpuIds = List.copyOf(gpuIds);
    savedAt = savedAt == null ? startedAt : savedAt;
    preemptedFor = preemptedFor == null ? "" : preemptedFor;
    if (gpuEighths < 0 || gpuEighths >= 8 || gpuEighths > 0 && gpuIds.size() != 1) {
      throw new IllegalArgumentException("running call " + id + ": a share of a GPU is 1..7"
          + " eighths of exactly one GPU, got " + gpuEighths + " eighths of " + gpuIds);
    }
  }

  /**
   * A running call field by field; {@link Builder#build} validates it. Unset: no GPUs, 1 CPU,
   * no memory, not preemptible, saved at its start, not being preempted.
   */
  public static Builder builder() {
    return new Builder();
  }

  public int gpus() {
    return gpuIds.size();
  }

  /** A share of one GPU rather than whole GPUs. */
  public boolean fractional() {
    return gpuEighths > 0;
  }

  /** GPUs as quotas, fair share and lost work count them: whole GPUs, or the share of one. */
  public double gpuShare() {
    return fractional() ? gpuEighths / 8.0 : gpus();
  }

  public boolean beingPreempted() {
    return !preemptedFor.isEmpty();
  }

  /** When its walltime runs out: the latest it can still hold its GPUs. */
  public Instant endsBy() {
    return startedAt.plus(walltime);
  }

  /** GPU-seconds of work lost if it is stopped at {@code nowMillis}. */
  public double lostGpuSeconds(long nowMillis) {
    double seconds = Math.max(0, nowMillis - savedAt.toEpochMilli()) / 1000.0;
    return seconds * (fractional() ? gpuShare() : Math.max(1, gpus()));
  }

  /** Mutable, one call at a time; tests start from one with test defaults and change a field. */
  public static final class Builder {
    private String id;
    private String user;
    private String group;
    private String qos;
    private String workerId;
    private List<Integer> gpuIds = List.of();
    private double cpus = 1;
    private long memoryBytes;
    private boolean preemptible;
    private Instant startedAt;
    private Duration walltime;
    private Instant savedAt;
    private String preemptedFor = "";
    private int gpuEighths;

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

    /** Where it runs: the worker and the CUDA indices of the GPUs it holds there. */
    public Builder on(String workerId, Collection<Integer> gpuIds) {
      this.workerId = workerId;
      this.gpuIds = List.copyOf(gpuIds);
      return this;
    }

    /** As {@link #on(String, Collection)}. */
    public Builder on(String workerId, int... gpuIds) {
      List<Integer> ids = new ArrayList<>(gpuIds.length);
      for (int gpu : gpuIds) {
        ids.add(gpu);
      }
      return on(workerId, ids);
    }

    public Builder cpus(double cpus) {
      this.cpus = cpus;
      return this;
    }

    public Builder memoryBytes(long memoryBytes) {
      this.memoryBytes = memoryBytes;
      return this;
    }

    public Builder preemptible(boolean preemptible) {
      this.preemptible = preemptible;
      return this;
    }

    public Builder startedAt(Instant startedAt) {
      this.startedAt = startedAt;
      return this;
    }

    public Builder walltime(Duration walltime) {
      this.walltime = walltime;
      return this;
    }

    /** When its work was last saved (its last checkpoint); unset: its start. */
    public Builder savedAt(Instant savedAt) {
      this.savedAt = savedAt;
      return this;
    }

    public Builder preemptedFor(String callId) {
      this.preemptedFor = callId;
      return this;
    }

    /** Holds this many eighths of its one GPU (0: its GPUs whole). */
    public Builder gpuEighths(int gpuEighths) {
      this.gpuEighths = gpuEighths;
      return this;
    }

    public RunningCall build() {
      return new RunningCall(id, user, group, qos, workerId, gpuIds, cpus, memoryBytes,
          preemptible, startedAt, walltime, savedAt, preemptedFor, gpuEighths);
    }
  }
}
