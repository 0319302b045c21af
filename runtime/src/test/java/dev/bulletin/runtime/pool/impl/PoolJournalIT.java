package dev.bulletin.runtime.pool.impl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.runtime.journal.JournalRecord;
import dev.bulletin.runtime.journal.JournalState;
import dev.bulletin.runtime.pool.LocalOptions;
import dev.bulletin.runtime.pool.PoolConfig;
import dev.bulletin.runtime.pool.PoolEvent;
import dev.bulletin.runtime.pool.PoolsConfig;
import dev.bulletin.runtime.pool.ProviderContext;
import dev.bulletin.runtime.pool.ProviderKind;
import dev.bulletin.runtime.pool.RegisteredWorker;
import dev.bulletin.runtime.pool.WorkerCommand;
import dev.bulletin.runtime.pool.WorkerHandle;
import dev.bulletin.runtime.pool.WorkerShape;
import dev.bulletin.runtime.workers.PoolJournal;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Pool workers across a restart, as the journal names them, with the local provider and real
 * processes: a restarted runtime adopts the journaled workers that live, forgets those that are
 * gone, stops those that do not reattach within the worker grace, and launches no duplicate.
 */
class PoolJournalIT {
  static final Duration LONG = Duration.ofSeconds(30);
  static final Duration GRACE = Duration.ofSeconds(60);

  @TempDir Path dir;
  final String clusterId = "pj" + UUID.randomUUID().toString().substring(0, 6);

  ProviderContext context() {
    return new ProviderContext(clusterId, "127.0.0.1:8770", "worker-token-0123456789",
        "/usr/bin/python3", dir.resolve("state"),
        new WorkerCommand(List.of("/bin/bash", "-c", "exec sleep 600", "stand-in")));
  }

  static PoolsConfig pools(int workers) {
    return pools("gpu", workers);
  }

  static PoolsConfig pools(String name, int workers) {
    return new PoolsConfig(List.of(PoolConfig.of(name, ProviderKind.LOCAL,
            new WorkerShape(1, 1, 0, Duration.ZERO), workers, Math.max(1, workers))
        .withLocal(new LocalOptions(true, Duration.ofSeconds(2)))
        .withTimeouts(Duration.ofMinutes(5), Duration.ZERO, Duration.ofMinutes(10))));
  }

  static boolean alive(WorkerHandle handle) {
    return ProcessHandle.of(Long.parseLong(handle.providerId())).map(ProcessHandle::isAlive)
        .orElse(false);
  }

  /** What the journal holds after these records: the workers a restart is told about. */
  static List<WorkerHandle> journaled(List<WorkerHandle> launched, List<WorkerHandle> ended) {
    JournalState state = new JournalState();
    launched.forEach(h -> state.apply(PoolJournal.record(h, true)));
    ended.forEach(h -> state.apply(PoolJournal.record(h, false)));
    return PoolJournal.handles(state.poolWorkers());
  }

  @Test
  void aRestartAdoptsLiveJournaledWorkersForgetsGoneOnesAndStopsThoseThatDoNotReattach()
      throws Exception {
    PoolsConfig pools = pools(3);
    AutoscalerHarness first = new AutoscalerHarness(pools, context());
    first.tick(List.of(), List.of());
    first.await("launched", e -> first.events.stream()
        .filter(x -> x.kind().equals("launched")).count() == 3, List.of(), List.of(), LONG);
    List<WorkerHandle> launched = first.onOwner(() -> List.copyOf(first.launched));
    // The runtime dies: its pool's workers keep running, and stay in the journal.
    first.onOwner(() -> first.autoscaler.shutdown(false)).get(30, TimeUnit.SECONDS);
    first.owner.shutdownNow();
    List<WorkerHandle> journaled = journaled(launched, first.ended);
    assertEquals(launched, journaled, "every launched worker is journaled, none ended");
    assertTrue(journaled.stream().allMatch(PoolJournalIT::alive));

    WorkerHandle reattaches = journaled.get(0);
    WorkerHandle silent = journaled.get(1);
    WorkerHandle dead = journaled.get(2);
    ProcessHandle died = ProcessHandle.of(Long.parseLong(dead.providerId())).orElseThrow();
    died.destroyForcibly();
    died.onExit().get(10, TimeUnit.SECONDS);

    try (AutoscalerHarness second = new AutoscalerHarness(pools, context(), journaled, GRACE)) {
      assertEquals(3, second.events("adopted").size(), second.events.toString());
      PoolEvent gone = second.events("gone").get(0);
      assertEquals(dead.workerId(), gone.workerId().orElseThrow());
      assertEquals(List.of(dead), second.onOwner(() -> List.copyOf(second.ended)),
          "the gone worker leaves the journal");

      Instant t = second.clock.instant();
      second.tick(List.of(RegisteredWorker.idle(reattaches.workerId(), t)), List.of());
      PoolEvent back = second.events("registered").get(0);
      assertTrue(back.message().startsWith("reattached"), back.message());
      second.await("launched", e -> true,
          List.of(RegisteredWorker.idle(reattaches.workerId(), t)), List.of(), LONG);
      assertEquals(1, second.events("launched").size(), "one launch, for the gone worker only: "
          + second.events.toString());

      second.onOwner(() -> {
        second.clock.advance(GRACE.plusSeconds(1));
        return null;
      });
      second.tick(List.of(RegisteredWorker.idle(reattaches.workerId(), t)), List.of());
      PoolEvent stopped = second.events("terminate").get(0);
      assertEquals(silent.workerId(), stopped.workerId().orElseThrow());
      assertTrue(stopped.message().contains("did not reattach within the worker grace"),
          stopped.message());
      SlurmProviderIT.waitFor(() -> !alive(silent), LONG, "the silent worker to be stopped");
      SlurmProviderIT.waitFor(() -> {
        try {
          return second.onOwner(() -> second.ended.contains(silent));
        } catch (Exception e) {
          throw new IllegalStateException(e);
        }
      }, LONG, "the stopped worker to leave the journal");
      assertTrue(alive(reattaches), "the reattached worker keeps running: " + second.events);
      assertFalse(second.onOwner(() -> second.ended.contains(reattaches)));
    }
    assertFalse(alive(reattaches), "down stops every worker");
  }

  @Test
  void aJournaledWorkerOfAPoolNoLongerConfiguredIsStoppedAsAnOrphan() throws Exception {
    AutoscalerHarness first = new AutoscalerHarness(pools(1), context());
    first.tick(List.of(), List.of());
    first.await("launched", LONG);
    List<WorkerHandle> launched = first.onOwner(() -> List.copyOf(first.launched));
    first.onOwner(() -> first.autoscaler.shutdown(false)).get(30, TimeUnit.SECONDS);
    first.owner.shutdownNow();

    // The new configuration has no pool "gpu" any more.
    try (AutoscalerHarness second = new AutoscalerHarness(pools("cpu", 1), context(), launched,
        GRACE)) {
      assertEquals(launched, second.onOwner(() -> List.copyOf(second.ended)));
      assertEquals(1, second.events("orphan").size(), second.events.toString());
      SlurmProviderIT.waitFor(() -> !alive(launched.get(0)), LONG, "the orphan to be stopped");
    }
  }

  @Test
  void aHandleTheJournalCannotReadIsLeftOut() {
    List<WorkerHandle> read = PoolJournal.handles(List.of(
        new JournalRecord.PoolWorker("gpu", "gpu-1", "LOCAL:123", true),
        new JournalRecord.PoolWorker("gpu", "gpu-2", "NOMAD:job-7", true),
        new JournalRecord.PoolWorker("gpu", "gpu-3", "no handle", true),
        new JournalRecord.PoolWorker("k8s", "k8s-4", "K8S:gpu-jobs/bulletin-c1-k8s-4", true)));
    assertEquals(List.of(new WorkerHandle(ProviderKind.LOCAL, "gpu", "gpu-1", "123"),
        new WorkerHandle(ProviderKind.KUBERNETES, "k8s", "k8s-4", "gpu-jobs/bulletin-c1-k8s-4")), read);
  }
}
