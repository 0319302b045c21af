package dev.bulletin.runtime.metrics;

import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;

/**
 * The dashboard's time chart: GPUs total, reserved and busy across the cluster, sampled from
 * the registry's {@code bulletin.gpus} gauges by state, kept in a ring buffer in memory (the
 * last hour at one sample every two seconds; a restart starts it afresh). Busy comes from the
 * utilisation samples the usage ledger turns into {@code state="busy"} gauges: while no such
 * gauge exists a sample's busy is NaN ("no utilisation samples"), never a made-up 0.
 * Sampled and read on the control plane's event loop.
 */
public final class GpuHistory {

  /** One sample: epoch milliseconds and GPU counts summed over workers; busy NaN when unknown. */
  public record Sample(long atMillis, double total, double reserved, double busy) {}

  private final MeterRegistry registry;
  private final Sample[] ring;
  private int next;
  private int size;

  public GpuHistory(MeterRegistry registry, int capacity) {
    if (capacity < 2) {
      throw new IllegalArgumentException("capacity must be >= 2, got " + capacity);
    }
    this.registry = registry;
    this.ring = new Sample[capacity];
  }

  /** Takes one sample of the gauges as they read now. */
  public void sample(long atMillis) {
    ring[next] = new Sample(atMillis, sum("total"), sum("reserved"), sum("busy"));
    next = (next + 1) % ring.length;
    size = Math.min(size + 1, ring.length);
  }

  /** The samples, oldest first. */
  public List<Sample> samples() {
    List<Sample> samples = new ArrayList<>(size);
    for (int i = 0; i < size; i++) {
      samples.add(ring[(next - size + i + ring.length) % ring.length]);
    }
    return samples;
  }

  /** The sum of the {@code bulletin.gpus} gauges in this state, NaN when there is none. */
  private double sum(String state) {
    Collection<Gauge> gauges = registry.find(ClusterMeters.GPUS).tag("state", state).gauges();
    if (gauges.isEmpty()) {
      return Double.NaN;
    }
    double sum = 0;
    for (Gauge gauge : gauges) {
      sum += gauge.value();
    }
    return sum;
  }
}
