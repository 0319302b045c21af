package dev.bulletin.runtime.pool;

import java.time.Duration;

import dev.bulletin.runtime.pool.impl.PoolAutoscaler;
import java.time.Clock;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;

/**
 * Runs the pools: asks each pool's {@link ScalingPolicy} on every tick, carries its decisions out
 * through the providers, and tells the runtime what to drain and forget. Every method must be
 * called on the owner (e.g. the runtime verticle's context, through {@code owner}); provider
 * answers come back through {@code owner} too. No Vert.x type here.
 */
public interface Autoscaler {

  static Autoscaler create(PoolsConfig pools, Map<ProviderKind, WorkerProvider> providers,
      Clock clock, ScalingMetrics metrics, Executor owner, PoolListener listener) {
    return new PoolAutoscaler(pools, providers, clock, metrics, owner, listener);
  }

  /**
   * Adopts the workers the providers still run for this cluster (after a restart): those of a
   * configured pool are tracked as starting until they register again, the others are stopped.
   * Call once, before the first tick.
   */
  default CompletableFuture<Void> start() {
    return start(List.of(), Duration.ZERO);
  }

  /**
   * {@link #start()} after a restart, with the workers the journal says an earlier runtime
   * launched: they are tracked at once (no tick launches their like again meanwhile); those the
   * provider no longer has are forgotten, and those that do not reattach within
   * {@code reattachGrace} (zero: no limit but start_timeout) are stopped.
   */
  CompletableFuture<Void> start(List<WorkerHandle> journaled, Duration reattachGrace);

  /** The pool a worker id was launched for; empty for workers started by hand. */
  Optional<String> poolOf(String workerId);

  /**
   * Call about once a second.
   *
   * @param registered the pool workers the runtime has registered now (hand-started ones may be
   *     included; they are ignored)
   * @param unservable calls waiting in the queue because no registered worker has room for them
   *     now (not those held back by a quota or QoS limit: more workers would not help them); each
   *     size goes to the first pool, in config order, whose worker shape fits it
   */
  void tick(List<RegisteredWorker> registered, List<PendingDemand> unservable);

  List<PoolStatus> status();

  /**
   * Stops the autoscaler. With {@code stopWorkers} every pool worker is stopped too (the cluster
   * goes down); without, they keep running for the next runtime to adopt.
   */
  CompletableFuture<Void> shutdown(boolean stopWorkers);
}
