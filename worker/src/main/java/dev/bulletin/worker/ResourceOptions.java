package dev.bulletin.worker;

import dev.bulletin.protocol.Text;
import dev.bulletin.protocol.Quantities;
import dev.bulletin.worker.GpuInventory;
import dev.bulletin.worker.GpuInventoryDetection;
import dev.bulletin.worker.WorkerOptions;
import java.lang.management.ManagementFactory;
import java.nio.file.Path;
import java.util.Map;
import picocli.CommandLine.Option;

/**
 * What a worker agent offers and how it runs executors: shared by the runtime's embedded worker
 * ({@code bulletin-runtime}) and a remote one ({@code bulletin worker}).
 */
public final class ResourceOptions {

  @Option(names = "--python", required = true, description = "Python interpreter with the bulletin package, for executors.")
  Path python;

  @Option(names = "--gpus", defaultValue = "auto", description = "GPUs to offer: auto (all nvidia-smi reports) or N.")
  String gpus;

  @Option(names = "--simulate-gpus", defaultValue = "0",
      description = "Advertise N simulated GPU slots (for machines without GPUs).")
  int simulateGpus;

  @Option(names = "--cpus", description = "CPU slots to offer (default: the machine's cores).")
  Integer cpus;

  @Option(names = "--memory", description = "Memory to offer, e.g. 64GiB (binary units; default: the machine's).")
  String memory;

  @Option(names = "--warm-cpu-executors", defaultValue = "2", description = "CPU executors kept warm (default: ${DEFAULT-VALUE}).")
  int warmCpuExecutors;

  @Option(names = "--executor-max-calls", defaultValue = "0",
      description = "Retire an executor after it has run N calls (default: 0, no limit).")
  int executorMaxCalls;

  @Option(names = "--executor-idle-seconds", defaultValue = "600",
      description = "Retire an executor that has run a user's calls after it has been idle this"
          + " long (default: ${DEFAULT-VALUE}).")
  double executorIdleSeconds;

  @Option(names = "--result-timeout-seconds", defaultValue = "300",
      description = "Once a call's function has returned, how long encoding and storing its"
          + " result may take before the executor is stopped as hung and the call fails"
          + " (default: ${DEFAULT-VALUE}).")
  double resultTimeoutSeconds;

  @Option(names = "--resident-idle-seconds", defaultValue = "3600",
      description = "Drop a user's spilled resident values (GPU state kept between calls) unused"
          + " this long (default: ${DEFAULT-VALUE}).")
  double residentIdleSeconds;

  @Option(names = "--resident-user-bytes", defaultValue = "0",
      description = "Most a user's executor keeps on its GPUs between calls, e.g. 8GiB (0: no"
          + " cap); a value past it comes back by value.")
  String residentUserBytes;

  @Option(names = "--resident-host-bytes", defaultValue = "0",
      description = "Most all executors of this host keep on their GPUs between calls (0: no"
          + " cap); past it the idle executors used longest ago spill theirs to the store.")
  String residentHostBytes;

  @Option(names = "--spilled-user-bytes", defaultValue = "0",
      description = "Most of a user's spilled resident values this host keeps (0: no cap).")
  String spilledUserBytes;

  @Option(names = "--spilled-host-bytes", defaultValue = "0",
      description = "Most spilled resident values this host keeps, all users (0: no cap).")
  String spilledHostBytes;

  public WorkerOptions worker(String workerId) {
    GpuInventory inventory = GpuInventoryDetection.resolve(gpus, simulateGpus);
    int cpuSlots = cpus != null ? cpus : Runtime.getRuntime().availableProcessors();
    long memoryBytes;
    try {
      memoryBytes = memory != null ? Quantities.parseSize(memory) : totalMemory();
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("--memory: " + e.getMessage(), e);
    }
    if (!(executorIdleSeconds > 0)) {
      throw new IllegalArgumentException("--executor-idle-seconds must be > 0, got "
          + executorIdleSeconds);
    }
    if (executorMaxCalls < 0) {
      throw new IllegalArgumentException("--executor-max-calls must be >= 0 (0: no limit), got "
          + executorMaxCalls);
    }
    if (!(resultTimeoutSeconds > 0)) {
      throw new IllegalArgumentException("--result-timeout-seconds must be > 0, got "
          + resultTimeoutSeconds);
    }
    return new WorkerOptions(workerId, python, inventory, cpuSlots, memoryBytes,
        warmCpuExecutors, 60_000, executorMaxCalls,
        Math.max(1, Math.round(executorIdleSeconds * 1000)), Map.of(),
        Math.max(1, Math.round(resultTimeoutSeconds * 1000)), residentLimits());
  }

  private ResidentLimits residentLimits() {
    if (!(residentIdleSeconds > 0)) {
      throw new IllegalArgumentException("--resident-idle-seconds must be > 0, got "
          + residentIdleSeconds);
    }
    return new ResidentLimits(Math.max(1, Math.round(residentIdleSeconds * 1000)),
        size("--resident-user-bytes", residentUserBytes),
        size("--spilled-user-bytes", spilledUserBytes),
        size("--spilled-host-bytes", spilledHostBytes),
        size("--resident-host-bytes", residentHostBytes));
  }

  private static long size(String option, String value) {
    try {
      return value.equals("0") ? 0 : Quantities.parseSize(value);
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(option + ": " + e.getMessage(), e);
    }
  }

  private static long totalMemory() {
    var os = ManagementFactory.getOperatingSystemMXBean();
    if (os instanceof com.sun.management.OperatingSystemMXBean sun) {
      return sun.getTotalMemorySize();
    }
    return Runtime.getRuntime().maxMemory();
  }

  /** "2 GPUs simulated, 4 CPUs" for start-up lines. */
  public static String describe(WorkerOptions worker) {
    int count = worker.gpus().count();
    return Text.count(count, "GPU") + (worker.gpus().simulated() ? " simulated" : "") + ", "
        + Text.count(worker.cpus(), "CPU");
  }
}
