package dev.bulletin.worker;

import java.nio.file.Path;
import java.util.Map;

/**
 * How a worker agent runs. Validated on construction; errors name the field.
 *
 * @param workerId name shown in status and logs
 * @param python interpreter that has the {@code bulletin} package installed
 * @param gpus the GPUs this worker offers
 * @param cpus CPU slots offered
 * @param memoryBytes memory offered
 * @param warmCpuExecutors CPU executors kept started and idle, ready for the next call
 * @param executorStartTimeoutMillis how long an executor may take to start and register
 * @param executorMaxCalls calls after which an executor is retired (replaced by a fresh one);
 *     0 for no limit
 * @param executorIdleMillis how long an executor that has run a user's calls stays warm for
 *     that user's next call before it is retired
 * @param extraEnvironment added to every executor's environment (which is otherwise built from
 *     an allowlist, not from the agent's own); no {@code BULLETIN_*} names: those the agent sets
 * @param resultTimeoutMillis how long a call may take, once its function has returned, to encode
 *     and store its result; past it the executor is stopped as hung and the call fails. A
 *     {@code __reduce__} that blocks, or native code that never returns, may otherwise hold the
 *     call and its slot for good
 */
public record WorkerOptions(
    String workerId,
    Path python,
    GpuInventory gpus,
    int cpus,
    long memoryBytes,
    int warmCpuExecutors,
    long executorStartTimeoutMillis,
    int executorMaxCalls,
    long executorIdleMillis,
    Map<String, String> extraEnvironment,
    long resultTimeoutMillis,
    ResidentLimits resident) {

  /** The default of {@link #executorIdleMillis}: ten minutes. */
  public static final long DEFAULT_EXECUTOR_IDLE_MILLIS = 600_000;
  /**
   * The default of {@link #resultTimeoutMillis}: five minutes, some fifty times what encoding and
   * writing the largest result a node's store holds takes (pickle protocol 5 encodes arrays out
   * of band, so their bytes are copied once).
   */
  public static final long DEFAULT_RESULT_TIMEOUT_MILLIS = 300_000;

  /** With the default {@link #resultTimeoutMillis}. */
  public WorkerOptions(String workerId, Path python, GpuInventory gpus, int cpus, long memoryBytes,
      int warmCpuExecutors, long executorStartTimeoutMillis, int executorMaxCalls,
      long executorIdleMillis, Map<String, String> extraEnvironment) {
    this(workerId, python, gpus, cpus, memoryBytes, warmCpuExecutors, executorStartTimeoutMillis,
        executorMaxCalls, executorIdleMillis, extraEnvironment, DEFAULT_RESULT_TIMEOUT_MILLIS);
  }

  /** With the default {@link ResidentLimits}. */
  public WorkerOptions(String workerId, Path python, GpuInventory gpus, int cpus, long memoryBytes,
      int warmCpuExecutors, long executorStartTimeoutMillis, int executorMaxCalls,
      long executorIdleMillis, Map<String, String> extraEnvironment, long resultTimeoutMillis) {
    this(workerId, python, gpus, cpus, memoryBytes, warmCpuExecutors, executorStartTimeoutMillis,
        executorMaxCalls, executorIdleMillis, extraEnvironment, resultTimeoutMillis,
        ResidentLimits.DEFAULT);
  }

  public WorkerOptions {
    resident = resident == null ? ResidentLimits.DEFAULT : resident;
    if (workerId == null || workerId.isBlank()) {
      throw new IllegalArgumentException("workerId must not be blank");
    }
    if (cpus < 1) {
      throw new IllegalArgumentException("cpus must be >= 1, got " + cpus);
    }
    if (memoryBytes < 0) {
      throw new IllegalArgumentException("memoryBytes must be >= 0, got " + memoryBytes);
    }
    if (warmCpuExecutors < 0) {
      throw new IllegalArgumentException("warmCpuExecutors must be >= 0, got " + warmCpuExecutors);
    }
    if (executorMaxCalls < 0) {
      throw new IllegalArgumentException("executorMaxCalls must be >= 0 (0: no limit), got "
          + executorMaxCalls);
    }
    if (executorIdleMillis < 1) {
      throw new IllegalArgumentException("executorIdleMillis must be >= 1, got "
          + executorIdleMillis);
    }
    if (resultTimeoutMillis < 1) {
      throw new IllegalArgumentException("resultTimeoutMillis must be >= 1, got "
          + resultTimeoutMillis);
    }
    extraEnvironment = Map.copyOf(extraEnvironment);
    for (String name : extraEnvironment.keySet()) {
      if (name.startsWith("BULLETIN_")) {
        throw new IllegalArgumentException("extraEnvironment must not set " + name
            + ": BULLETIN_* variables of executors are the agent's own");
      }
    }
  }
}
