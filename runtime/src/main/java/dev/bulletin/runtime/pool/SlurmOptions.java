package dev.bulletin.runtime.pool;

import java.util.List;
import java.util.Optional;
import java.util.Set;

/**
 * How a Slurm pool asks for its jobs.
 *
 * @param partition {@code --partition}; empty = the cluster's default partition
 * @param account {@code --account}; empty = the user's default
 * @param qos {@code --qos}; empty = the default
 * @param extraArgs further sbatch options, each one argument ("--constraint=a100")
 * @param simulateGpus workers advertise the allocated GPUs as simulated (nodes without real GPUs)
 * @param logDir where job output goes; must exist on the compute nodes; empty = the runtime's state folder
 */
public record SlurmOptions(Optional<String> partition, Optional<String> account,
    Optional<String> qos, List<String> extraArgs, boolean simulateGpus, Optional<String> logDir) {

  /** Options bulletin sets itself: overriding them would break finding jobs again or the shape. */
  static final Set<String> RESERVED = Set.of("--job-name", "-J", "--comment", "--parsable",
      "--output", "-o", "--error", "-e", "--gres", "--cpus-per-task", "-c", "--mem", "--time", "-t",
      "--partition", "-p", "--account", "-A", "--qos", "-q", "--export", "--wrap", "--array", "-a");

  public SlurmOptions {
    partition = partition.filter(s -> !s.isBlank());
    account = account.filter(s -> !s.isBlank());
    qos = qos.filter(s -> !s.isBlank());
    extraArgs = List.copyOf(extraArgs);
    logDir = logDir.filter(s -> !s.isBlank());
    for (String arg : extraArgs) {
      if (!arg.startsWith("-")) {
        throw new IllegalArgumentException("slurm.extra_args: each entry is one sbatch option"
            + " starting with '-' (e.g. \"--constraint=a100\"), got '" + arg + "'");
      }
      String name = arg.contains("=") ? arg.substring(0, arg.indexOf('=')) : arg;
      if (RESERVED.contains(name)) {
        throw new IllegalArgumentException("slurm.extra_args: '" + name + "' is set by bulletin;"
            + " use the pool's fields instead (worker.gpus/cpus/memory/walltime, slurm.partition,"
            + " slurm.account, slurm.qos, slurm.log_dir)");
      }
    }
  }

  public static SlurmOptions defaults() {
    return new SlurmOptions(Optional.empty(), Optional.empty(), Optional.empty(), List.of(), false,
        Optional.empty());
  }
}
