package dev.bulletin.runtime.pool.impl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.runtime.pool.PoolConfig;
import dev.bulletin.runtime.pool.PoolsConfig;
import dev.bulletin.runtime.pool.ProvidedWorker;
import dev.bulletin.runtime.pool.ProviderContext;
import dev.bulletin.runtime.pool.ProviderException;
import dev.bulletin.runtime.pool.ProviderKind;
import dev.bulletin.runtime.pool.SlurmOptions;
import dev.bulletin.runtime.pool.WorkerCommand;
import dev.bulletin.runtime.pool.WorkerHandle;
import dev.bulletin.runtime.pool.WorkerProviders;
import dev.bulletin.runtime.pool.WorkerShape;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The Slurm provider against the real one-node Slurm of .ci/slurm, with a stand-in worker. */
class SlurmProviderIT {

  static final String TOKEN = "worker-token-" + UUID.randomUUID();

  @TempDir Path dir;
  String clusterId;
  ProviderContext context;

  /** Records its arguments and a hash of the token it got, then sleeps like a worker. */
  static WorkerCommand standIn(Path out) {
    String script = "d=" + Commands.shellQuote(out.toString()) + "\n"
        + "printf '%s\\n' \"$@\" > \"$d/$SLURM_JOB_ID.args.tmp\"\n"
        + "printf '%s' \"$BULLETIN_WORKER_TOKEN\" | sha256sum | cut -d' ' -f1 > \"$d/$SLURM_JOB_ID.token\"\n"
        + "mv \"$d/$SLURM_JOB_ID.args.tmp\" \"$d/$SLURM_JOB_ID.args\"\n"
        + "exec sleep 600\n";
    return new WorkerCommand(List.of("/bin/bash", "-c", script, "stand-in"));
  }

  @BeforeEach
  void setUp() {
    SlurmTestCluster.ensure();
    clusterId = "it" + UUID.randomUUID().toString().substring(0, 6);
    context = new ProviderContext(clusterId, "127.0.0.1:8770", TOKEN, "/usr/bin/python3",
        dir.resolve("state"), standIn(dir));
  }

  @AfterEach
  void cancelJobs() {
    if (clusterId != null) {
      SlurmTestCluster.cancelAll(clusterId);
    }
  }

  static PoolConfig pool(String name, int gpus, Duration walltime) {
    return PoolConfig.of(name, ProviderKind.SLURM, new WorkerShape(gpus, 1, 100L << 20, walltime), 0, 4)
        .withSlurm(new SlurmOptions(Optional.of(SlurmTestCluster.PARTITION), Optional.empty(),
            Optional.empty(), List.of(), true, Optional.empty()));
  }

  @Test
  void launchesFindsAfterARestartAndCancels() throws Exception {
    PoolConfig pool = pool("gpu", 1, Duration.ofMinutes(3));
    WorkerHandle handle;
    Path args = dir.resolve("none");
    try (SlurmProvider provider = new SlurmProvider(context)) {
      long start = System.nanoTime();
      handle = provider.launch(pool, "gpu-w1").get(60, TimeUnit.SECONDS);
      assertEquals(new WorkerHandle(ProviderKind.SLURM, "gpu", "gpu-w1", handle.providerId()), handle);
      args = dir.resolve(handle.providerId() + ".args");
      Path argsFile = args;
      waitFor(() -> Files.exists(argsFile), Duration.ofSeconds(60), "the job's command to run");
      System.out.printf("slurm job start latency (sbatch to the job's command running): %.2f s%n",
          (System.nanoTime() - start) / 1e9);
    }
    List<String> argv = Files.readAllLines(args);
    long expiresAt = Long.parseLong(argv.get(argv.indexOf("--expires-at") + 1));
    assertEquals(List.of("--head", "127.0.0.1:8770", "--pool", "gpu", "--worker-id", "gpu-w1",
        "--simulate-gpus", "1", "--cpus", "1", "--memory", "100MiB", "--expires-at",
        Long.toString(expiresAt)), argv);
    long expected = Instant.now().plus(Duration.ofMinutes(3)).getEpochSecond();
    assertTrue(Math.abs(expiresAt - expected) < 30, "expires-at is the job's start + walltime: "
        + expiresAt + " vs about " + expected);
    assertEquals(sha256(TOKEN), Files.readString(dir.resolve(handle.providerId() + ".token")).strip(),
        "the token reaches the job through its environment");
    String script = Files.readString(dir.resolve("state/slurm/gpu-w1.sbatch"));
    assertFalse(script.contains(TOKEN), "the token is never written into the batch script");

    // A restarted runtime: a new provider instance finds the job by its name and comment.
    try (SlurmProvider restarted = new SlurmProvider(context)) {
      List<ProvidedWorker> listed = restarted.list().get(60, TimeUnit.SECONDS);
      assertEquals(1, listed.size(), listed.toString());
      assertEquals(handle, listed.get(0).handle());
      assertTrue(listed.get(0).running());
      assertTrue(Math.abs(listed.get(0).expiresAt().orElseThrow().getEpochSecond() - expiresAt) <= 1,
          "squeue's end time is the one the worker got");

      ProviderContext otherCluster = new ProviderContext("other" + clusterId, "127.0.0.1:8770", TOKEN,
          "/usr/bin/python3", dir.resolve("other"), standIn(dir));
      try (SlurmProvider other = new SlurmProvider(otherCluster)) {
        assertEquals(List.of(), other.list().get(60, TimeUnit.SECONDS), "another cluster's jobs are not ours");
      }

      restarted.terminate(handle).get(60, TimeUnit.SECONDS);
      waitFor(() -> SlurmTestCluster.job(handle.providerId()).isEmpty(), Duration.ofSeconds(60),
          "scancel to end the job");
      assertEquals(List.of(), restarted.list().get(60, TimeUnit.SECONDS));
      restarted.terminate(handle).get(60, TimeUnit.SECONDS); // a gone job is no error
    }
  }

  @Test
  void aMissingPartitionIsRefusedAtStartUpAndBySbatch() throws Exception {
    PoolConfig bad = pool("gpu", 1, Duration.ofMinutes(3)).withSlurm(new SlurmOptions(
        Optional.of("no-such-partition"), Optional.empty(), Optional.empty(), List.of(), true,
        Optional.empty()));
    IllegalArgumentException atStartUp = assertThrows(IllegalArgumentException.class,
        () -> WorkerProviders.check(new PoolsConfig(List.of(bad))));
    assertTrue(atStartUp.getMessage().startsWith("pools[0] (gpu).slurm.partition: Slurm has no"
        + " partition 'no-such-partition'"), atStartUp.getMessage());
    assertTrue(atStartUp.getMessage().contains("partitions: " + SlurmTestCluster.PARTITION),
        atStartUp.getMessage());
    WorkerProviders.check(new PoolsConfig(List.of(pool("gpu", 1, Duration.ofMinutes(3)))));

    try (SlurmProvider provider = new SlurmProvider(context)) {
      ExecutionException refused = assertThrows(ExecutionException.class,
          () -> provider.launch(bad, "gpu-w1").get(60, TimeUnit.SECONDS));
      assertTrue(refused.getCause() instanceof ProviderException, refused.toString());
      assertTrue(refused.getCause().getMessage().startsWith("sbatch refused the worker job for pool gpu:"),
          refused.getCause().getMessage());
      assertTrue(refused.getCause().getMessage().contains("invalid partition"),
          refused.getCause().getMessage());
    }
  }

  @Test
  void gresIsHonouredTwoThreeGpuJobsOnAFourGpuNodeOnePends() throws Exception {
    PoolConfig pool = pool("big", 3, Duration.ofMinutes(3));
    try (SlurmProvider provider = new SlurmProvider(context)) {
      WorkerHandle first = provider.launch(pool, "big-w1").get(60, TimeUnit.SECONDS);
      waitFor(() -> SlurmTestCluster.job(first.providerId()).startsWith("RUNNING"),
          Duration.ofSeconds(60), "the first 3-GPU job to run");
      WorkerHandle second = provider.launch(pool, "big-w2").get(60, TimeUnit.SECONDS);
      waitFor(() -> SlurmTestCluster.job(second.providerId()).equals("PENDING Resources"),
          Duration.ofSeconds(30), "the second 3-GPU job to pend on Resources");
      List<ProvidedWorker> listed = provider.list().get(60, TimeUnit.SECONDS);
      assertEquals(2, listed.size(), listed.toString());
      assertEquals(List.of(true, false), listed.stream()
          .sorted((a, b) -> a.handle().workerId().compareTo(b.handle().workerId()))
          .map(ProvidedWorker::running).toList());

      provider.terminate(first).get(60, TimeUnit.SECONDS);
      waitFor(() -> SlurmTestCluster.job(second.providerId()).startsWith("RUNNING"),
          Duration.ofSeconds(60), "the second job to run once the first frees its GPUs");
    }
  }

  static void waitFor(Supplier<Boolean> condition, Duration timeout, String what) throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (!condition.get()) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("timed out after " + timeout.toSeconds() + "s waiting for " + what);
      }
      Thread.sleep(100);
    }
  }

  static String sha256(String text) throws Exception {
    byte[] digest = MessageDigest.getInstance("SHA-256").digest(text.getBytes(StandardCharsets.UTF_8));
    return String.format("%064x", new BigInteger(1, digest));
  }
}
