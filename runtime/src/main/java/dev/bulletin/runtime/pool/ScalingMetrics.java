package dev.bulletin.runtime.pool;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;

/**
 * Counts scaling decisions in Micrometer: {@code bulletin.pool.decisions{pool, kind}} where kind
 * is launch (counted per worker), terminate, replace or backoff.
 */
public final class ScalingMetrics {
  public static final String DECISIONS = "bulletin.pool.decisions";

  private final MeterRegistry registry;

  public ScalingMetrics(MeterRegistry registry) {
    this.registry = registry;
  }

  /** For tests and tools that do not export metrics. */
  public static ScalingMetrics inMemory() {
    return new ScalingMetrics(new SimpleMeterRegistry());
  }

  public MeterRegistry registry() {
    return registry;
  }

  void count(String pool, String kind, int amount) {
    Counter.builder(DECISIONS)
        .description("Scaling decisions of worker pools, by kind")
        .tag("pool", pool)
        .tag("kind", kind)
        .register(registry)
        .increment(amount);
  }

  /** The count so far, 0 when none. */
  public double count(String pool, String kind) {
    Counter counter = registry.find(DECISIONS).tag("pool", pool).tag("kind", kind).counter();
    return counter == null ? 0 : counter.count();
  }
}
