package dev.bulletin.runtime.pool.impl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.runtime.pool.PendingDemand;
import dev.bulletin.runtime.pool.WorkerHandle;
import dev.bulletin.runtime.pool.PoolConfig;
import dev.bulletin.runtime.pool.PoolEvent;
import dev.bulletin.runtime.pool.PoolsConfig;
import dev.bulletin.runtime.pool.ProviderContext;
import dev.bulletin.runtime.pool.ProviderKind;
import dev.bulletin.runtime.pool.RegisteredWorker;
import dev.bulletin.runtime.pool.SlurmOptions;
import dev.bulletin.runtime.pool.WorkerShape;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The autoscaler through the real one-node Slurm: scale from zero with sbatch, scale down with
 * scancel, a job cancelled behind the runtime's back, sbatch refusing a request. The test plays
 * the runtime (registrations, calls); the job runs a stand-in for the worker command.
 */
class SlurmAutoscalerIT {

  static final Duration LONG = Duration.ofSeconds(60);
  static final Duration LIST_STEP = Duration.ofSeconds(11);

  @TempDir Path dir;
  String clusterId;
  ProviderContext context;

  @BeforeEach
  void setUp() {
    SlurmTestCluster.ensure();
    clusterId = "sa" + UUID.randomUUID().toString().substring(0, 6);
    context = new ProviderContext(clusterId, "127.0.0.1:8770", "worker-token-0123456789",
        "/usr/bin/python3", dir.resolve("state"), SlurmProviderIT.standIn(dir));
  }

  @AfterEach
  void cancelJobs() {
    if (clusterId != null) {
      SlurmTestCluster.cancelAll(clusterId);
    }
  }

  static PoolConfig pool(int gpus) {
    return PoolConfig.of("gpu", ProviderKind.SLURM, new WorkerShape(gpus, 1, 100L << 20,
        Duration.ofMinutes(10)), 0, 2).withSlurm(new SlurmOptions(Optional.of(SlurmTestCluster.PARTITION),
        Optional.empty(), Optional.empty(), List.of(), true, Optional.empty()));
  }

  static String jobOf(PoolEvent launched) {
    String m = launched.message();
    return m.substring(m.indexOf("Slurm job ") + 10, m.indexOf(')'));
  }

  @Test
  void scalesFromZeroThroughSbatchAndDownThroughScancel() throws Exception {
    List<PendingDemand> oneCall = List.of(PendingDemand.of(1, 1));
    try (AutoscalerHarness h = new AutoscalerHarness(new PoolsConfig(List.of(pool(1))), context)) {
      h.tick(List.of(), oneCall);
      String job = jobOf(h.await("launched", LONG));
      String worker = h.events("launched").get(0).workerId().orElseThrow();
      SlurmProviderIT.waitFor(() -> SlurmTestCluster.job(job).startsWith("RUNNING"), LONG, "the job to run");

      Instant t = h.clock.instant();
      h.tick(List.of(RegisteredWorker.busy(worker, 1, t)), List.of());
      assertEquals(1, h.events("registered").size());
      assertEquals(1, h.events("launch").size(), "no second sbatch for the same call");

      h.onOwner(() -> {
        h.clock.advance(Duration.ofMinutes(6));
        return null;
      });
      h.tick(List.of(RegisteredWorker.idle(worker, t)), List.of());
      assertTrue(h.events("terminate").get(0).message().startsWith("idle for 6m"));
      SlurmProviderIT.waitFor(() -> SlurmTestCluster.job(job).isEmpty(), LONG, "scancel to end the job");
    }
  }

  @Test
  void aRestartAdoptsTheJournaledJobAndCancelsItWhenItDoesNotReattach() throws Exception {
    PoolsConfig pools = new PoolsConfig(List.of(pool(1)));
    List<PendingDemand> oneCall = List.of(PendingDemand.of(1, 1));
    AutoscalerHarness first = new AutoscalerHarness(pools, context);
    first.tick(List.of(), oneCall);
    String job = jobOf(first.await("launched", LONG));
    List<WorkerHandle> journaled = first.onOwner(() -> List.copyOf(first.launched));
    assertEquals(List.of(job), journaled.stream().map(WorkerHandle::providerId).toList());
    // The runtime dies: its job stays, and in the journal.
    first.onOwner(() -> first.autoscaler.shutdown(false)).get(30, TimeUnit.SECONDS);
    first.owner.shutdownNow();
    assertFalse(SlurmTestCluster.job(job).isEmpty(), "a crash leaves the job");

    Duration grace = Duration.ofSeconds(60);
    try (AutoscalerHarness second = new AutoscalerHarness(pools, context, journaled, grace)) {
      assertEquals(1, second.events("adopted").size(), second.events.toString());
      second.tick(List.of(), oneCall);
      assertEquals(List.of(), second.events("launch"), "the journaled job serves the call: no"
          + " second sbatch");
      second.onOwner(() -> {
        second.clock.advance(grace.plusSeconds(1));
        return null;
      });
      second.tick(List.of(), List.of());
      PoolEvent stopped = second.events("terminate").get(0);
      assertTrue(stopped.message().contains("did not reattach within the worker grace"),
          stopped.message());
      SlurmProviderIT.waitFor(() -> SlurmTestCluster.job(job).isEmpty(), LONG,
          "scancel to end the job");
      SlurmProviderIT.waitFor(() -> {
        try {
          return second.onOwner(() -> second.ended.equals(journaled));
        } catch (Exception e) {
          throw new IllegalStateException(e);
        }
      }, LONG, "the cancelled job to leave the journal");
    }
  }

  @Test
  void aJobCancelledBehindTheRuntimesBackIsReported() throws Exception {
    try (AutoscalerHarness h = new AutoscalerHarness(new PoolsConfig(List.of(pool(1))), context)) {
      h.tick(List.of(), List.of(PendingDemand.of(1, 1)));
      String job = jobOf(h.await("launched", LONG));
      String worker = h.events("launched").get(0).workerId().orElseThrow();
      RegisteredWorker busy = RegisteredWorker.busy(worker, 1, h.clock.instant());
      h.tick(List.of(busy), List.of());

      Commands.run(List.of("scancel", job), Map.of(), Duration.ofSeconds(30));
      SlurmProviderIT.waitFor(() -> SlurmTestCluster.job(job).isEmpty(), LONG, "the job to end");
      PoolEvent exited = h.await("exited", e -> true, List.of(busy), List.of(), LONG, LIST_STEP);
      assertEquals(Optional.of(worker), exited.workerId());
      assertTrue(exited.message().contains("Slurm job " + job), exited.message());
      assertEquals(List.of(worker), h.onOwner(() -> List.copyOf(h.stopping)),
          "the runtime is told to forget it and requeue its calls");
    }
  }

  @Test
  void sbatchRefusingARequestBacksOffWithSlurmsMessage() throws Exception {
    List<PendingDemand> eightGpus = List.of(PendingDemand.of(1, 8));
    try (AutoscalerHarness h = new AutoscalerHarness(new PoolsConfig(List.of(pool(8))), context)) {
      h.tick(List.of(), eightGpus);
      PoolEvent failed = h.await("launch-failed", LONG);
      assertTrue(failed.message().startsWith("launch failed (1 in a row): sbatch refused the worker"
          + " job for pool gpu: sbatch: error:"), failed.message());
      assertTrue(failed.message().contains("next attempt in 5s"), failed.message());
      h.tick(List.of(), eightGpus);
      assertEquals(1, h.events("launch").size(), "no sbatch while backing off");
    }
  }
}
