package dev.bulletin.runtime.pool.impl;

import dev.bulletin.runtime.pool.Autoscaler;
import dev.bulletin.runtime.pool.FakeClock;
import dev.bulletin.runtime.pool.PendingDemand;
import dev.bulletin.runtime.pool.PoolEvent;
import dev.bulletin.runtime.pool.PoolListener;
import dev.bulletin.runtime.pool.WorkerHandle;
import dev.bulletin.runtime.pool.PoolsConfig;
import dev.bulletin.runtime.pool.ProviderContext;
import dev.bulletin.runtime.pool.RegisteredWorker;
import dev.bulletin.runtime.pool.ScalingMetrics;
import dev.bulletin.runtime.pool.WorkerProviders;
import dev.bulletin.runtime.pool.ProviderKind;
import dev.bulletin.runtime.pool.WorkerProvider;
import java.util.Map;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;

/**
 * Plays the runtime around a real autoscaler: one owner thread, a fake clock for the policy, real
 * providers, and a listener that records what the autoscaler asked.
 */
final class AutoscalerHarness implements AutoCloseable {
  final FakeClock clock = new FakeClock(Instant.parse("2025-01-01T12:00:00Z"));
  final ScalingMetrics metrics = ScalingMetrics.inMemory();
  final ExecutorService owner = Executors.newSingleThreadExecutor();
  final List<PoolEvent> events = new ArrayList<>();
  final List<String> drained = new ArrayList<>();
  final List<String> stopping = new ArrayList<>();
  /** What the runtime would journal: workers launched or adopted, and ended. */
  final List<WorkerHandle> launched = new ArrayList<>();
  final List<WorkerHandle> ended = new ArrayList<>();
  final Autoscaler autoscaler;

  AutoscalerHarness(PoolsConfig pools, ProviderContext context) throws Exception {
    this(pools, context, List.of(), Duration.ZERO);
  }

  /** A restarted runtime's: {@code journaled} are the workers its journal names. */
  AutoscalerHarness(PoolsConfig pools, ProviderContext context, List<WorkerHandle> journaled,
      Duration reattachGrace) throws Exception {
    this(pools, WorkerProviders.forPools(pools, context), journaled, reattachGrace);
  }

  /** Around given providers (a Kubernetes provider on a test API server's client). */
  AutoscalerHarness(PoolsConfig pools, Map<ProviderKind, WorkerProvider> providers,
      List<WorkerHandle> journaled, Duration reattachGrace) throws Exception {
    PoolListener listener = new PoolListener() {
      @Override
      public void drain(String workerId, String reason) {
        drained.add(workerId);
      }

      @Override
      public void stopping(String workerId, String reason) {
        stopping.add(workerId);
      }

      @Override
      public void event(PoolEvent event) {
        events.add(event);
      }

      @Override
      public void launched(WorkerHandle handle) {
        launched.add(handle);
      }

      @Override
      public void ended(WorkerHandle handle) {
        ended.add(handle);
      }
    };
    autoscaler = Autoscaler.create(pools, providers, clock, metrics, owner, listener);
    autoscaler.start(journaled, reattachGrace).get(60, TimeUnit.SECONDS);
  }

  <T> T onOwner(Callable<T> call) throws Exception {
    return owner.submit(call).get(60, TimeUnit.SECONDS);
  }

  void tick(List<RegisteredWorker> registered, List<PendingDemand> pending) throws Exception {
    onOwner(() -> {
      autoscaler.tick(registered, pending);
      return null;
    });
  }

  /** Waits for an event, ticking with the given view (lists answer on later ticks). */
  PoolEvent await(String kind, Predicate<PoolEvent> match, List<RegisteredWorker> registered,
      List<PendingDemand> pending, Duration timeout) throws Exception {
    return await(kind, match, registered, pending, timeout, Duration.ZERO);
  }

  /** As above, moving the fake clock by {@code step} before each tick (provider listings are timed). */
  PoolEvent await(String kind, Predicate<PoolEvent> match, List<RegisteredWorker> registered,
      List<PendingDemand> pending, Duration timeout, Duration step) throws Exception {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (true) {
      List<PoolEvent> seen = onOwner(() -> List.copyOf(events));
      for (PoolEvent e : seen) {
        if (e.kind().equals(kind) && match.test(e)) {
          return e;
        }
      }
      if (System.nanoTime() > deadline) {
        throw new AssertionError("no '" + kind + "' event within " + timeout.toSeconds() + "s; events: " + seen);
      }
      Thread.sleep(100);
      onOwner(() -> {
        clock.advance(step);
        return null;
      });
      tick(registered, pending);
    }
  }

  PoolEvent await(String kind, Duration timeout) throws Exception {
    return await(kind, e -> true, List.of(), List.of(), timeout);
  }

  List<PoolEvent> events(String kind) throws Exception {
    return onOwner(() -> events.stream().filter(e -> e.kind().equals(kind)).toList());
  }

  @Override
  public void close() throws Exception {
    onOwner(() -> autoscaler.shutdown(true)).get(60, TimeUnit.SECONDS);
    owner.shutdownNow();
  }
}
