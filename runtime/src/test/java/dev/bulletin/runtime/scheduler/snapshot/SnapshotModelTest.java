package dev.bulletin.runtime.scheduler.snapshot;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.runtime.scheduler.plan.LatencyHistogram;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

class SnapshotModelTest {

  @Test
  void topologyIsReadFromNvidiaSmiTopoM() {
    String output = """
                GPU0    GPU1    GPU2    GPU3    CPU Affinity    NUMA Affinity
        GPU0     X      NV12    PIX     SYS     0-31            0
        GPU1    NV12     X      PXB     SYS     0-31            0
        GPU2    PIX     PXB      X      PHB     0-31            0
        GPU3    SYS     SYS     PHB      X      32-63           1
        """;
    GpuTopology topology = GpuTopology.parseNvidiaSmi(output);
    assertEquals(4, topology.gpus());
    assertEquals(GpuTopology.Link.NVLINK, topology.link(0, 1));
    assertEquals(GpuTopology.Link.PCIE_SWITCH, topology.link(0, 2));
    assertEquals(GpuTopology.Link.PCIE_SWITCH, topology.link(1, 2));
    assertEquals(GpuTopology.Link.HOST, topology.link(2, 3));
    assertEquals(GpuTopology.Link.HOST, topology.link(3, 0));
    assertEquals(1, GpuTopology.parseNvidiaSmi("\tGPU0\tCPU Affinity\nGPU0\t X \t0-31\n")
        .gpus());
  }

  @Test
  void workersRejectFreeGpusOutsideTheirTopology() {
    IllegalArgumentException error = assertThrows(IllegalArgumentException.class,
        () -> new WorkerState("w1", GpuTopology.uniform(2, GpuTopology.Link.HOST),
            Set.of(0, 5), 8, 8, 0, 0, Map.of(), false, null));
    assertTrue(error.getMessage().contains("free GPU 5 is outside 0..1"), error.getMessage());
  }

  @Test
  void histogramPercentilesAreWithinABucket() {
    LatencyHistogram histogram = new LatencyHistogram();
    for (int i = 1; i <= 1000; i++) {
      histogram.record(i * 1000L);
    }
    long p99 = histogram.percentileNanos(99);
    assertTrue(p99 >= 990_000 && p99 <= 990_000 * 1.13, "p99 " + p99);
    long p50 = histogram.percentileNanos(50);
    assertTrue(p50 >= 500_000 && p50 <= 500_000 * 1.13, "p50 " + p50);
    assertEquals(1_000_000, histogram.maxNanos());
  }

  @Test
  void aBuiltCallIsValidatedAndNamesWhatIsMissing() {
    IllegalArgumentException missing = assertThrows(IllegalArgumentException.class,
        () -> QueuedCall.builder().id("c1").user("ann").build());
    assertEquals("queued call c1: user, group, demand and submittedAt are required",
        missing.getMessage());
    IllegalArgumentException gpus = assertThrows(IllegalArgumentException.class,
        () -> QueuedCall.builder().id("c1").gpus(-1).build());
    assertTrue(gpus.getMessage().startsWith("gpus must be >= 0"), gpus.getMessage());
    IllegalArgumentException running = assertThrows(IllegalArgumentException.class,
        () -> RunningCall.builder().id("r1").user("ann").group("nlp").build());
    assertEquals("running call r1: user, group, qos, workerId, startedAt and walltime are"
        + " required", running.getMessage());
  }

  @Test
  void buildersFillEveryField() {
    java.time.Instant at = java.time.Instant.parse("2025-03-03T09:00:00Z");
    QueuedCall call = QueuedCall.builder().id("c1").user("ann").group("nlp").qos("batch")
        .demand(new dev.bulletin.runtime.scheduler.Demand(2, 4, 1024)).priority(3)
        .creditsSpent(5).input("a", 10).input("b", 20).submittedAt(at)
        .walltime(java.time.Duration.ofHours(1)).build();
    assertEquals(new QueuedCall("c1", "ann", "nlp", "batch",
        new dev.bulletin.runtime.scheduler.Demand(2, 4, 1024), 3, 5, Map.of("a", 10L, "b", 20L),
        at, java.time.Duration.ofHours(1), ""), call);
    RunningCall running = RunningCall.builder().id("r1").user("bob").group("vision")
        .qos("scavenger").on("w1", 0, 1).cpus(2).memoryBytes(512).preemptible(true)
        .startedAt(at).walltime(java.time.Duration.ofHours(2))
        .savedAt(at.plus(java.time.Duration.ofMinutes(5))).preemptedFor("c1").build();
    assertEquals(new RunningCall("r1", "bob", "vision", "scavenger", "w1", java.util.List.of(0, 1),
        2, 512, true, at, java.time.Duration.ofHours(2), at.plus(java.time.Duration.ofMinutes(5)),
        "c1", 0),
        running);
  }
}
