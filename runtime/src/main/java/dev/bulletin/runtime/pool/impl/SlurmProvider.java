package dev.bulletin.runtime.pool.impl;

import dev.bulletin.runtime.pool.PoolConfig;
import dev.bulletin.runtime.pool.ProvidedWorker;
import dev.bulletin.runtime.pool.ProviderContext;
import dev.bulletin.runtime.pool.ProviderException;
import dev.bulletin.runtime.pool.ProviderKind;
import dev.bulletin.protocol.Quantities;
import dev.bulletin.runtime.pool.WorkerHandle;
import dev.bulletin.runtime.pool.WorkerProvider;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.ZoneId;
import java.time.format.DateTimeParseException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Workers as Slurm batch jobs, one worker per job. The job's name and comment carry the cluster
 * id, the pool and the worker id: that is how {@link #list} finds them again after a restart. The
 * token travels in the job's environment ({@code --export=ALL} of sbatch's own environment), never
 * in the script or on a command line.
 */
public final class SlurmProvider implements WorkerProvider {

  private static final Duration COMMAND_TIMEOUT = Duration.ofSeconds(60);
  private static final Pattern COMMENT =
      Pattern.compile("bulletin cluster=(\\S+) pool=(\\S+) worker=(\\S+)");
  /** Slurm prints local times; "standard" pins the ISO-like form this class parses. */
  private static final Map<String, String> SLURM_ENV = Map.of("SLURM_TIME_FORMAT", "standard");

  private final ProviderContext context;
  private final Path scripts;
  private final ExecutorService threads = Executors.newCachedThreadPool(r -> {
    Thread thread = new Thread(r, "bulletin-slurm");
    thread.setDaemon(true);
    return thread;
  });

  public SlurmProvider(ProviderContext context) {
    this.context = context;
    this.scripts = context.stateDir().resolve("slurm");
  }

  @Override
  public ProviderKind kind() {
    return ProviderKind.SLURM;
  }

  public String jobName(String pool) {
    return "bulletin-" + context.clusterId() + "-" + pool;
  }

  @Override
  public CompletableFuture<WorkerHandle> launch(PoolConfig pool, String workerId) {
    return CompletableFuture.supplyAsync(() -> submit(pool, workerId), threads);
  }

  private WorkerHandle submit(PoolConfig pool, String workerId) {
    Path logDir = pool.slurm().logDir().map(Path::of).orElse(scripts.resolve("logs"));
    Path script = scripts.resolve(workerId + ".sbatch");
    try {
      Files.createDirectories(logDir);
      Files.createDirectories(scripts);
      Files.writeString(script, script(pool, workerId));
    } catch (IOException e) {
      throw new UncheckedIOException("cannot write the batch script " + script + ": " + e.getMessage(), e);
    }
    List<String> argv = new ArrayList<>(List.of("sbatch", "--parsable",
        "--job-name=" + jobName(pool.name()),
        "--comment=bulletin cluster=" + context.clusterId() + " pool=" + pool.name() + " worker=" + workerId,
        "--cpus-per-task=" + pool.worker().cpus(),
        "--time=" + Quantities.slurmTime(pool.worker().walltime()),
        "--output=" + logDir.resolve(workerId + "-%j.log"),
        "--export=ALL"));
    if (pool.worker().gpus() > 0) {
      argv.add("--gres=gpu:" + pool.worker().gpus());
    }
    pool.worker().memory().ifPresent(bytes -> argv.add("--mem=" + ((bytes + (1 << 20) - 1) >> 20) + "M"));
    pool.slurm().partition().ifPresent(p -> argv.add("--partition=" + p));
    pool.slurm().account().ifPresent(a -> argv.add("--account=" + a));
    pool.slurm().qos().ifPresent(q -> argv.add("--qos=" + q));
    argv.addAll(pool.slurm().extraArgs());
    argv.add(script.toString());
    Map<String, String> environment = new java.util.HashMap<>(Map.of("BULLETIN_WORKER_TOKEN",
        context.workerToken(), "SLURM_TIME_FORMAT", "standard"));
    // A batch job may wait in the queue: its token is good for a day (single use all the same).
    context.joinTokens().export(workerId, Duration.ofDays(1), environment);
    Commands.Result result = Commands.run(argv, environment, COMMAND_TIMEOUT);
    String jobId = result.stdout().strip().split(";")[0];
    if (!result.ok() || !jobId.matches("\\d+(_\\d+)?")) {
      throw new ProviderException("sbatch refused the worker job for pool " + pool.name() + ": "
          + (result.said().isEmpty() ? "exit code " + result.exitCode() : result.said()));
    }
    return new WorkerHandle(ProviderKind.SLURM, pool.name(), workerId, jobId);
  }

  /**
   * The batch script: find when the allocation ends (Slurm's own EndTime, so a rounded or changed
   * time limit is honoured), then exec the worker with it.
   */
  String script(PoolConfig pool, String workerId) {
    List<String> argv = context.command().argv(pool, context.pythonFor(pool),
        context.headAddress(), workerId, pool.slurm().simulateGpus());
    StringBuilder command = new StringBuilder("exec");
    for (String word : argv) {
      command.append(' ').append(Commands.shellQuote(word));
    }
    long walltime = pool.worker().walltime().toSeconds();
    return "#!/bin/bash\n"
        + "# bulletin worker " + workerId + " of pool " + pool.name() + ", cluster "
        + context.clusterId() + " (written by the runtime; sbatch keeps its own copy)\n"
        + "export SLURM_TIME_FORMAT=standard\n"
        + "end=${SLURM_JOB_END_TIME:-}\n"
        + "if [ -z \"$end\" ]; then\n"
        + "  t=$(scontrol show job \"$SLURM_JOB_ID\" 2>/dev/null | grep -o 'EndTime=[^ ]*' | head -n 1 | cut -d= -f2)\n"
        + "  case \"$t\" in [0-9]*) end=$(date -d \"$t\" +%s 2>/dev/null || true) ;; esac\n"
        + "fi\n"
        + "# Without Slurm's answer: our start plus the walltime, a minute early (the job began first).\n"
        + "[ -n \"$end\" ] || end=$(( $(date +%s) + " + walltime + " - 60 ))\n"
        + command + " --expires-at \"$end\"\n";
  }

  @Override
  public CompletableFuture<Void> terminate(WorkerHandle handle) {
    return CompletableFuture.runAsync(() -> {
      Commands.Result result = Commands.run(List.of("scancel", handle.providerId()), SLURM_ENV,
          COMMAND_TIMEOUT);
      if (!result.ok() && !result.said().contains("Invalid job id")) {
        throw new ProviderException("scancel " + handle.providerId() + " failed for worker "
            + handle.workerId() + ": " + result.said());
      }
    }, threads);
  }

  @Override
  public CompletableFuture<List<ProvidedWorker>> list() {
    return CompletableFuture.supplyAsync(() -> {
      Commands.Result result = Commands.run(List.of("squeue", "--me", "--noheader",
          "--format=%i|%T|%e|%j|%k"), SLURM_ENV, COMMAND_TIMEOUT);
      if (!result.ok()) {
        throw new ProviderException("squeue failed: " + result.said());
      }
      return parseQueue(result.stdout());
    }, threads);
  }

  List<ProvidedWorker> parseQueue(String squeue) {
    String prefix = "bulletin-" + context.clusterId() + "-";
    List<ProvidedWorker> out = new ArrayList<>();
    for (String line : squeue.split("\n")) {
      String[] f = line.strip().split("\\|", 5);
      if (f.length < 5 || !f[3].startsWith(prefix)) {
        continue;
      }
      Matcher m = COMMENT.matcher(f[4].strip());
      if (!m.matches() || !m.group(1).equals(context.clusterId())) {
        continue;
      }
      boolean running = f[1].equals("RUNNING") || f[1].equals("COMPLETING");
      Optional<Instant> end = running ? parseTime(f[2]) : Optional.empty();
      out.add(new ProvidedWorker(new WorkerHandle(ProviderKind.SLURM, m.group(2), m.group(3), f[0]),
          running, end));
    }
    return out;
  }

  private static Optional<Instant> parseTime(String text) {
    try {
      return Optional.of(LocalDateTime.parse(text.strip()).atZone(ZoneId.systemDefault()).toInstant());
    } catch (DateTimeParseException e) {
      return Optional.empty();
    }
  }

  /**
   * Start-up check of one Slurm pool: the Slurm commands answer and the partition exists. Throws
   * with the field and what exists.
   */
  public static void check(PoolConfig pool, String label) {
    Commands.Result version;
    try {
      version = Commands.run(List.of("sbatch", "--version"), SLURM_ENV, COMMAND_TIMEOUT);
    } catch (UncheckedIOException e) {
      throw new IllegalArgumentException(label + ".provider: slurm needs the Slurm client commands"
          + " (sbatch, squeue, scancel, scontrol) on the runtime's host: " + e.getMessage());
    }
    if (!version.ok()) {
      throw new IllegalArgumentException(label + ".provider: sbatch --version failed: " + version.said());
    }
    if (pool.slurm().partition().isEmpty()) {
      return;
    }
    String partition = pool.slurm().partition().get();
    Commands.Result show = Commands.run(List.of("scontrol", "show", "partition", partition),
        SLURM_ENV, COMMAND_TIMEOUT);
    if (!show.ok()) {
      Commands.Result all = Commands.run(List.of("sinfo", "--noheader", "--format=%R"), SLURM_ENV,
          COMMAND_TIMEOUT);
      String known = all.ok() ? String.join(", ", all.stdout().strip().split("\\s+")) : "sinfo failed: " + all.said();
      throw new IllegalArgumentException(label + ".slurm.partition: Slurm has no partition '"
          + partition + "' (" + show.said() + "; partitions: " + known + ")");
    }
  }

  @Override
  public void close() {
    threads.shutdownNow();
  }
}
