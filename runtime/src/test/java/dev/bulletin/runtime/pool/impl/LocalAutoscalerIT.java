package dev.bulletin.runtime.pool.impl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.runtime.pool.LocalOptions;
import dev.bulletin.runtime.pool.PendingDemand;
import dev.bulletin.runtime.pool.PoolConfig;
import dev.bulletin.runtime.pool.PoolEvent;
import dev.bulletin.runtime.pool.PoolsConfig;
import dev.bulletin.runtime.pool.ProviderContext;
import dev.bulletin.runtime.pool.ProviderKind;
import dev.bulletin.runtime.pool.RegisteredWorker;
import dev.bulletin.runtime.pool.WorkerCommand;
import dev.bulletin.runtime.pool.WorkerShape;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The autoscaler end to end with the local provider and real processes; the test plays the
 * runtime (it reports registrations and calls) since the worker command is a stand-in here.
 */
class LocalAutoscalerIT {

  static final Duration LONG = Duration.ofSeconds(30);
  static final List<PendingDemand> ONE_CALL = List.of(PendingDemand.of(1, 1));

  @TempDir Path dir;
  String clusterId;

  @BeforeEach
  void setUp() {
    clusterId = "la" + UUID.randomUUID().toString().substring(0, 6);
  }

  ProviderContext context(String script) {
    return new ProviderContext(clusterId, "127.0.0.1:8770", "worker-token-0123456789",
        "/usr/bin/python3", dir.resolve("state"),
        new WorkerCommand(List.of("/bin/bash", "-c", script, "stand-in")));
  }

  static PoolConfig pool(String name, int min, Duration walltime) {
    return PoolConfig.of(name, ProviderKind.LOCAL, new WorkerShape(1, 1, 0, walltime), min, 2)
        .withLocal(new LocalOptions(true, Duration.ofSeconds(2)))
        .withTimeouts(Duration.ofMinutes(5), walltime.isZero() ? Duration.ZERO : Duration.ofMinutes(10),
            Duration.ofMinutes(2));
  }

  static boolean alive(String pid) {
    return ProcessHandle.of(Long.parseLong(pid)).map(ProcessHandle::isAlive).orElse(false);
  }

  static String pidOf(PoolEvent launched) {
    String m = launched.message();
    return m.substring(m.indexOf("pid ") + 4, m.indexOf(')'));
  }

  @Test
  void scalesFromZeroOnACallAndDownAfterTheIdleTimeout() throws Exception {
    try (AutoscalerHarness h = new AutoscalerHarness(new PoolsConfig(List.of(pool("gpu", 0, Duration.ZERO))),
        context("exec sleep 600"))) {
      h.tick(List.of(), ONE_CALL);
      PoolEvent launch = h.events("launch").get(0);
      assertTrue(launch.message().contains("1 waiting call need 1 worker"), launch.message());
      PoolEvent launched = h.await("launched", LONG);
      String worker = launched.workerId().orElseThrow();
      assertEquals(Optional.of("gpu"), h.onOwner(() -> h.autoscaler.poolOf(worker)));
      assertTrue(alive(pidOf(launched)));

      Instant t = h.clock.instant();
      h.tick(List.of(RegisteredWorker.busy(worker, 1, t)), List.of());
      assertEquals(1, h.events("registered").size());
      h.tick(List.of(RegisteredWorker.idle(worker, t)), List.of());
      h.onOwner(() -> {
        h.clock.advance(Duration.ofMinutes(4));
        return null;
      });
      h.tick(List.of(RegisteredWorker.idle(worker, t)), List.of());
      assertEquals(List.of(), h.events("terminate"), "idle 4m < idle_timeout 5m");
      h.onOwner(() -> {
        h.clock.advance(Duration.ofMinutes(2));
        return null;
      });
      h.tick(List.of(RegisteredWorker.idle(worker, t)), List.of());
      PoolEvent terminate = h.events("terminate").get(0);
      assertTrue(terminate.message().startsWith("idle for 6m (idle_timeout 5m)"), terminate.message());
      assertEquals(List.of(worker), h.onOwner(() -> List.copyOf(h.stopping)));
      SlurmProviderIT.waitFor(() -> !alive(pidOf(launched)), LONG, "the idle worker to be stopped");
      assertEquals(1, h.metrics.count("gpu", "launch"));
      assertEquals(1, h.metrics.count("gpu", "terminate"));
      assertEquals(1, h.events("launch").size(), "one launch in all: no duplicates");
    }
  }

  @Test
  void aWorkerThatDiesBeforeRegisteringBacksLaunchesOff() throws Exception {
    try (AutoscalerHarness h = new AutoscalerHarness(new PoolsConfig(List.of(pool("gpu", 0, Duration.ZERO))),
        context("echo 'ImportError: no module named bulletin' >&2; exit 3"))) {
      h.tick(List.of(), ONE_CALL);
      PoolEvent failed = h.await("launch-failed", e -> true, List.of(), ONE_CALL, LONG, Duration.ofSeconds(1));
      assertTrue(failed.message().contains("ended before it registered"), failed.message());
      assertTrue(failed.message().contains("next attempt in 5s"), failed.message());
      assertTrue(failed.message().contains("/local/logs/"), "points at the worker's log: " + failed.message());
      assertTrue(h.onOwner(() -> h.autoscaler.status()).get(0).backoffUntil().isPresent());

      int launches = h.events("launch").size();
      h.tick(List.of(), ONE_CALL);
      assertEquals(launches, h.events("launch").size(), "no launch while backing off");
      h.onOwner(() -> {
        h.clock.advance(Duration.ofSeconds(5));
        return null;
      });
      h.tick(List.of(), ONE_CALL);
      assertEquals(launches + 1, h.events("launch").size(), "launches resume after the backoff");
      assertEquals(1, h.metrics.count("gpu", "backoff"));
      // Let the second launch fail too before closing: a launch still in flight would write its
      // state file into the temporary folder while JUnit deletes it.
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      while (h.events("launch-failed").size() < 2 && System.nanoTime() < deadline) {
        h.tick(List.of(), ONE_CALL);
        Thread.sleep(50);
      }
    }
  }

  @Test
  void aRestartedRuntimeAdoptsItsWorkersAndStopsOrphans() throws Exception {
    ProviderContext context = context("exec sleep 600");
    PoolsConfig pools = new PoolsConfig(List.of(pool("gpu", 2, Duration.ZERO)));
    AutoscalerHarness first = new AutoscalerHarness(pools, context);
    first.tick(List.of(), List.of());
    first.await("launched", e -> first.events.stream().filter(x -> x.kind().equals("launched")).count() == 2,
        List.of(), List.of(), LONG);
    List<String> workers = first.events("launched").stream().map(e -> e.workerId().orElseThrow()).toList();
    List<String> pids = first.events("launched").stream().map(LocalAutoscalerIT::pidOf).toList();
    first.onOwner(() -> first.autoscaler.shutdown(false)).get(30, TimeUnit.SECONDS);
    first.owner.shutdownNow();

    // A worker of a pool the new configuration no longer has.
    LocalProvider direct = new LocalProvider(context);
    String orphanPid = direct.launch(pool("retired", 0, Duration.ZERO), "retired-w1")
        .get(30, TimeUnit.SECONDS).providerId();
    direct.close();

    try (AutoscalerHarness second = new AutoscalerHarness(pools, context)) {
      assertEquals(2, second.events("adopted").size(), second.events.toString());
      assertTrue(pids.stream().allMatch(LocalAutoscalerIT::alive), "a restart leaves workers running");
      PoolEvent orphan = second.events("orphan").get(0);
      assertTrue(orphan.message().contains("to no configured pool"), orphan.message());
      SlurmProviderIT.waitFor(() -> !alive(orphanPid), LONG, "the orphan to be stopped");
      for (String w : workers) {
        assertEquals(Optional.of("gpu"), second.onOwner(() -> second.autoscaler.poolOf(w)));
      }
      Instant t = second.clock.instant();
      second.tick(workers.stream().map(w -> RegisteredWorker.idle(w, t)).toList(), List.of());
      assertEquals(2, second.events("registered").size());
      assertEquals(List.of(), second.events("launch"), "min_workers 2 are the adopted two: no duplicates");
    }
    assertTrue(pids.stream().noneMatch(LocalAutoscalerIT::alive), "down stops every worker: " + pids);
  }

  @Test
  void aWorkerNearItsWalltimeIsDrainedReplacedAndStopped() throws Exception {
    try (AutoscalerHarness h = new AutoscalerHarness(
        new PoolsConfig(List.of(pool("gpu", 1, Duration.ofHours(1)))), context("exec sleep 600"))) {
      h.tick(List.of(), List.of());
      String old = h.await("launched", LONG).workerId().orElseThrow();
      Instant expiry = h.clock.instant().plus(Duration.ofMinutes(30));
      RegisteredWorker busy = new RegisteredWorker(old, 1, h.clock.instant(), Optional.of(expiry));
      h.tick(List.of(busy), List.of());
      assertEquals(List.of(), h.events("replace"));

      h.onOwner(() -> {
        h.clock.advance(Duration.ofMinutes(21));
        return null;
      });
      h.tick(List.of(busy), List.of());
      PoolEvent replace = h.events("replace").get(0);
      assertTrue(replace.message().startsWith("allocation ends in 9m"), replace.message());
      assertEquals(List.of(old), h.onOwner(() -> List.copyOf(h.drained)));
      assertEquals(2, h.events("launch").size(), "the successor launches in the same round");
      String successor = h.await("launched", e -> !e.workerId().orElseThrow().equals(old),
          List.of(busy), List.of(), LONG).workerId().orElseThrow();

      Instant t = h.clock.instant();
      h.tick(List.of(new RegisteredWorker(old, 0, t, Optional.of(expiry)),
          RegisteredWorker.idle(successor, t)), List.of());
      PoolEvent stop = h.events("terminate").get(0);
      assertEquals(Optional.of(old), stop.workerId());
      assertTrue(stop.message().startsWith("drained"), stop.message());
      assertEquals(List.of(old), h.onOwner(() -> List.copyOf(h.stopping)));
    }
  }
}
