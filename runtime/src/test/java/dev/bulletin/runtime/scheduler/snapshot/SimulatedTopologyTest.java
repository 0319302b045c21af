package dev.bulletin.runtime.scheduler.snapshot;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.bulletin.worker.GpuInventory;
import org.junit.jupiter.api.Test;

/** Simulated GPUs report a topology the scheduler reads like a real `nvidia-smi topo -m`. */
class SimulatedTopologyTest {

  @Test
  void simulatedGpusComeInNvlinkPairs() {
    GpuTopology topology = GpuTopology.parseNvidiaSmi(GpuInventory.simulated(4).topology());
    assertEquals(4, topology.gpus());
    assertEquals(GpuTopology.Link.NVLINK, topology.link(0, 1));
    assertEquals(GpuTopology.Link.NVLINK, topology.link(2, 3));
    assertEquals(GpuTopology.Link.HOST, topology.link(1, 2));
    assertEquals(GpuTopology.Link.HOST, topology.link(0, 3));
  }

  @Test
  void oneSimulatedGpuHasNoPairs() {
    assertEquals(1, GpuTopology.parseNvidiaSmi(GpuInventory.simulated(1).topology()).gpus());
  }
}
