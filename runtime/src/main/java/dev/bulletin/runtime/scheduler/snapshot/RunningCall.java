package dev.bulletin.runtime.scheduler.snapshot;

import java.time.Duration;
import java.time.Instant;
import java.util.List;

/**
 * A call holding GPUs now.
 *
 * @param preemptible it runs as preemptible: its QoS is preemptible, or it borrowed idle
 *     capacity over its group's quota. Only such calls are ever chosen as victims, and they do
 *     not count against the group's concurrent-GPU quota.
 * @param unsavedWork work lost if it is stopped now: time since its start or its last
 *     checkpoint (the runtime knows which)
 * @param preemptedFor the queued call it is being stopped for ("" if none); a call already being
 *     stopped is not chosen again, and its beneficiary waits for it instead of planning anew
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
    Duration unsavedWork,
    String preemptedFor) {

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
    unsavedWork = unsavedWork == null ? Duration.ZERO : unsavedWork;
    preemptedFor = preemptedFor == null ? "" : preemptedFor;
  }

  public int gpus() {
    return gpuIds.size();
  }

  public boolean beingPreempted() {
    return !preemptedFor.isEmpty();
  }

  /** When its walltime runs out: the latest it can still hold its GPUs. */
  public Instant endsBy() {
    return startedAt.plus(walltime);
  }

  /** GPU-seconds of work lost if it is stopped now. */
  public double lostGpuSeconds() {
    return unsavedWork.toMillis() / 1000.0 * Math.max(1, gpus());
  }
}
