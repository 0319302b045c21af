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
}
