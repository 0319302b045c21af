package dev.bulletin.runtime.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.runtime.pool.ScalingDecision.Launch;
import dev.bulletin.runtime.pool.ScalingDecision.Replace;
import dev.bulletin.runtime.pool.ScalingDecision.Terminate;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

class ScalingPolicyTest {

  static final Instant T0 = Instant.parse("2025-01-01T12:00:00Z");
  static final WorkerShape ONE_GPU = new WorkerShape(1, 4, 0, Duration.ZERO);
  static final WorkerShape FOUR_GPUS = new WorkerShape(4, 16, 64L << 30, Duration.ZERO);
  static final WorkerShape SLURM_4H = new WorkerShape(1, 4, 0, Duration.ofHours(4));

  static PoolConfig pool(WorkerShape shape, int min, int max, int warm) {
    return PoolConfig.of("gpu", ProviderKind.LOCAL, shape, min, max).withWarm(warm)
        .withTimeouts(Duration.ofMinutes(5), shape.walltime().isZero() ? Duration.ZERO
            : Duration.ofMinutes(10), Duration.ofMinutes(2));
  }

  static PoolWorker w(String id, WorkerState state, Duration ago) {
    return PoolWorker.of(id, state, T0.minus(ago));
  }

  static PoolWorker draining(String id, int running) {
    return new PoolWorker(id, WorkerState.DRAINING, T0.minusSeconds(30), running, Optional.empty());
  }

  static List<PendingDemand> calls(int count, int gpus) {
    return List.of(PendingDemand.of(count, gpus));
  }

  static String summary(List<ScalingDecision> decisions) {
    List<String> out = new ArrayList<>();
    for (ScalingDecision d : decisions) {
      if (d instanceof Launch launch) {
        out.add("launch " + launch.count());
      } else if (d instanceof Terminate terminate) {
        out.add("terminate " + terminate.workerId());
      } else if (d instanceof Replace replace) {
        out.add("replace " + replace.workerId());
      }
    }
    return String.join(", ", out);
  }

  static Arguments row(String name, PoolConfig pool, List<PoolWorker> workers,
      List<PendingDemand> pending, int inFlight, String expected) {
    return Arguments.of(name, pool, workers, pending, inFlight, expected);
  }

  static Stream<Arguments> table() {
    Duration m = Duration.ofMinutes(1);
    List<PoolWorker> none = List.of();
    List<PendingDemand> nothing = List.of();
    return Stream.of(
        row("nothing to do with no demand and min 0", pool(ONE_GPU, 0, 4, 0), none, nothing, 0, ""),
        row("scale from zero on pending calls", pool(ONE_GPU, 0, 4, 0), none, calls(3, 1), 0, "launch 3"),
        row("calls pack onto bigger workers", pool(FOUR_GPUS, 0, 8, 0), none, calls(10, 1), 0, "launch 3"),
        row("memory can be the scarce resource", pool(FOUR_GPUS, 0, 8, 0), none,
            List.of(new PendingDemand(1, 1, 32L << 30, 4)), 0, "launch 2"),
        row("calls too big for the shape are not this pool's", pool(ONE_GPU, 0, 4, 0), none,
            calls(5, 2), 0, ""),
        row("max_workers caps a scale-up", pool(ONE_GPU, 0, 4, 0), none, calls(10, 1), 0, "launch 4"),
        row("starting workers absorb demand", pool(ONE_GPU, 0, 4, 0),
            List.of(w("a", WorkerState.STARTING, m), w("b", WorkerState.STARTING, m)), calls(3, 1), 0,
            "launch 1"),
        row("launches in flight absorb demand", pool(ONE_GPU, 0, 4, 0), none, calls(3, 1), 3, ""),
        row("min_workers from zero", pool(ONE_GPU, 2, 4, 0), none, nothing, 0, "launch 2"),
        row("warm worker from zero", pool(ONE_GPU, 0, 4, 1), none, nothing, 0, "launch 1"),
        row("an idle worker is the warm one", pool(ONE_GPU, 0, 4, 1),
            List.of(w("a", WorkerState.IDLE, m.multipliedBy(30))), nothing, 0, ""),
        row("a busy worker is not warm: launch another", pool(ONE_GPU, 0, 4, 1),
            List.of(w("a", WorkerState.BUSY, m)), nothing, 0, "launch 1"),
        row("a call taking the warm worker launches the next warm one", pool(ONE_GPU, 0, 4, 1),
            List.of(w("a", WorkerState.IDLE, m)), calls(1, 1), 0, "launch 1"),
        row("idle past idle_timeout is stopped", pool(ONE_GPU, 0, 4, 0),
            List.of(w("a", WorkerState.IDLE, m.multipliedBy(6))), nothing, 0, "terminate a"),
        row("idle under idle_timeout stays", pool(ONE_GPU, 0, 4, 0),
            List.of(w("a", WorkerState.IDLE, m.multipliedBy(4))), nothing, 0, ""),
        row("never below min_workers; the longest idle goes first", pool(ONE_GPU, 1, 4, 0),
            List.of(w("a", WorkerState.IDLE, m.multipliedBy(6)), w("b", WorkerState.IDLE, m.multipliedBy(9))),
            nothing, 0, "terminate b"),
        row("busy workers are never stopped for idleness", pool(ONE_GPU, 0, 4, 0),
            List.of(w("a", WorkerState.BUSY, m.multipliedBy(60))), nothing, 0, ""),
        row("busy worker near walltime is replaced; min keeps a successor", pool(SLURM_4H, 1, 4, 0),
            List.of(w("a", WorkerState.BUSY, m).expiringAt(T0.plus(m.multipliedBy(5)))), nothing, 0,
            "replace a, launch 1"),
        row("busy worker near walltime, no need for a successor", pool(SLURM_4H, 0, 4, 0),
            List.of(w("a", WorkerState.BUSY, m).expiringAt(T0.plus(m.multipliedBy(5)))), nothing, 0,
            "replace a"),
        row("idle worker near walltime is stopped, not drained", pool(SLURM_4H, 1, 4, 0),
            List.of(w("a", WorkerState.IDLE, m).expiringAt(T0.plus(m.multipliedBy(9)))), nothing, 0,
            "terminate a, launch 1"),
        row("far from walltime nothing happens", pool(SLURM_4H, 1, 4, 0),
            List.of(w("a", WorkerState.IDLE, m).expiringAt(T0.plus(m.multipliedBy(11)))), nothing, 0, ""),
        row("a drained worker with no call left is stopped", pool(ONE_GPU, 0, 4, 0),
            List.of(draining("a", 0)), nothing, 0, "terminate a"),
        row("a draining worker still holds its allocation under max_workers", pool(ONE_GPU, 0, 1, 0),
            List.of(draining("a", 2)), calls(1, 1), 0, ""),
        row("a worker past start_timeout is stopped and launches back off", pool(ONE_GPU, 0, 4, 0),
            List.of(w("a", WorkerState.STARTING, m.multipliedBy(3))), calls(1, 1), 0, "terminate a"),
        row("shrinking prefers the worker closest to expiry", pool(SLURM_4H, 0, 4, 0),
            List.of(w("a", WorkerState.IDLE, m.multipliedBy(20)).expiringAt(T0.plus(m.multipliedBy(200))),
                w("b", WorkerState.IDLE, m.multipliedBy(6)).expiringAt(T0.plus(m.multipliedBy(30)))),
            calls(1, 1), 0, "terminate b"));
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("table")
  void decides(String name, PoolConfig pool, List<PoolWorker> workers, List<PendingDemand> pending,
      int inFlight, String expected) {
    ScalingPolicy policy = new ScalingPolicy(pool, new FakeClock(T0), ScalingMetrics.inMemory());
    List<ScalingDecision> decisions = policy.decide(new PoolSnapshot(workers, pending, inFlight));
    assertEquals(expected, summary(decisions), name + ": " + decisions);
    for (ScalingDecision d : decisions) {
      assertTrue(!d.reason().isBlank(), "every decision has a reason: " + d);
    }
  }

  @Test
  void launchFailuresBackOffExponentiallyUpToTheCapAndResetOnSuccess() {
    FakeClock clock = new FakeClock(T0);
    ScalingMetrics metrics = ScalingMetrics.inMemory();
    PoolConfig pool = pool(ONE_GPU, 0, 4, 0);
    ScalingPolicy policy = new ScalingPolicy(pool, clock, metrics);
    PoolSnapshot demand = new PoolSnapshot(List.of(), calls(1, 1), 0);

    List<Duration> delays = new ArrayList<>();
    for (int i = 0; i < 9; i++) {
      BackoffEvent event = policy.launchFailed("sbatch: error: Invalid partition name specified");
      delays.add(event.delay());
      assertTrue(event.reason().contains("Invalid partition name"), event.reason());
      assertEquals("", summary(policy.decide(demand)), "no launch while backing off");
      clock.advance(event.delay().minusSeconds(1));
      assertEquals("", summary(policy.decide(demand)), "still backing off 1s before retryAt");
      clock.advance(Duration.ofSeconds(1));
      assertEquals("launch 1", summary(policy.decide(demand)), "launches resume at retryAt");
    }
    assertEquals(List.of(5L, 10L, 20L, 40L, 80L, 160L, 300L, 300L, 300L),
        delays.stream().map(Duration::toSeconds).toList());
    assertEquals(9, metrics.count("gpu", "backoff"));

    policy.launchSucceeded();
    assertEquals(Duration.ofSeconds(5), policy.launchFailed("again").delay());
  }

  @Test
  void aStartTimeoutCountsAsAFailedLaunch() {
    FakeClock clock = new FakeClock(T0);
    ScalingPolicy policy = new ScalingPolicy(pool(ONE_GPU, 0, 4, 0), clock, ScalingMetrics.inMemory());
    policy.decide(new PoolSnapshot(
        List.of(w("a", WorkerState.STARTING, Duration.ofMinutes(3))), calls(1, 1), 0));
    assertEquals(Optional.of(T0.plusSeconds(5)), policy.backoffUntil());
    clock.advance(Duration.ofSeconds(5));
    assertEquals("launch 1", summary(policy.decide(new PoolSnapshot(List.of(), calls(1, 1), 0))));
  }

  @Test
  void decisionsAreCountedByPoolAndKind() {
    ScalingMetrics metrics = ScalingMetrics.inMemory();
    ScalingPolicy policy = new ScalingPolicy(pool(SLURM_4H, 0, 8, 0), new FakeClock(T0), metrics);
    policy.decide(new PoolSnapshot(List.of(
        w("a", WorkerState.IDLE, Duration.ofMinutes(6)),
        w("b", WorkerState.BUSY, Duration.ofMinutes(1)).expiringAt(T0.plusSeconds(60))),
        calls(3, 1), 0));
    // a is idle and the 3 calls want it: it stays; b is replaced; 3 calls minus idle a = 2 launches.
    assertEquals(2, metrics.count("gpu", "launch"));
    assertEquals(1, metrics.count("gpu", "replace"));
    assertEquals(0, metrics.count("gpu", "terminate"));
  }

  @Test
  void reasonsSaySizesAndLimits() {
    ScalingPolicy policy = new ScalingPolicy(pool(ONE_GPU, 0, 4, 0), new FakeClock(T0),
        ScalingMetrics.inMemory());
    ScalingDecision launch = policy.decide(new PoolSnapshot(List.of(), calls(10, 1), 0)).get(0);
    assertTrue(launch.reason().contains("10 waiting calls need 10 workers"), launch.reason());
    assertTrue(launch.reason().contains("capped by max_workers 4"), launch.reason());
  }
}
