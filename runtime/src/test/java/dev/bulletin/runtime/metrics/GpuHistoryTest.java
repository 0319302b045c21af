package dev.bulletin.runtime.metrics;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

class GpuHistoryTest {
  private final MeterRegistry registry = new SimpleMeterRegistry();
  private final AtomicInteger reserved = new AtomicInteger();

  private void gauge(String worker, String state, AtomicInteger value) {
    Gauge.builder(ClusterMeters.GPUS, value, AtomicInteger::get).tag("worker", worker)
        .tag("state", state).strongReference(true).register(registry); // no GC of the value
  }

  @Test
  void busyIsUnknownUntilAUtilisationGaugeExistsAndTheRingKeepsTheNewest() {
    gauge("a", "total", new AtomicInteger(4));
    gauge("b", "total", new AtomicInteger(2));
    gauge("a", "reserved", reserved);
    GpuHistory history = new GpuHistory(registry, 3);
    reserved.set(1);
    history.sample(1_000);
    GpuHistory.Sample first = history.samples().get(0);
    assertEquals(6, first.total());
    assertEquals(1, first.reserved());
    assertTrue(Double.isNaN(first.busy()), "no utilisation sample is not 0 busy GPUs");

    gauge("a", "busy", new AtomicInteger(1)); // what the usage ledger registers
    for (long at = 2_000; at <= 4_000; at += 1_000) {
      reserved.incrementAndGet();
      history.sample(at);
    }
    List<GpuHistory.Sample> samples = history.samples();
    assertEquals(List.of(2_000L, 3_000L, 4_000L),
        samples.stream().map(GpuHistory.Sample::atMillis).toList());
    assertEquals(4, samples.get(2).reserved());
    assertEquals(1, samples.get(2).busy());
  }
}
