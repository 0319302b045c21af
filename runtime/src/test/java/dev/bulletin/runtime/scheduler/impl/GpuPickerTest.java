package dev.bulletin.runtime.scheduler.impl;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.bulletin.runtime.scheduler.snapshot.GpuTopology;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

class GpuPickerTest {

  /** A DGX-like box: NVLink pairs 0-1, 2-3, 4-5, 6-7; PCIe switches 0-3 and 4-7. */
  private static final GpuTopology PAIRS = GpuTopology.builder(8)
      .nvlinkPairs(0, 1, 2, 3, 4, 5, 6, 7).pcieSwitch(0, 1, 2, 3).pcieSwitch(4, 5, 6, 7).build();
  private static final GpuTopology HOST_ONLY = GpuTopology.uniform(4, GpuTopology.Link.HOST);

  static Stream<Arguments> cases() {
    return Stream.of(
        // name, topology, free GPUs, wanted, expected GPUs, expected topology score
        Arguments.of("pair on NVLink over a split pair", PAIRS, new int[] {0, 2, 3, 5}, 2,
            new int[] {2, 3}, 1.0),
        Arguments.of("four on one switch", PAIRS, new int[] {0, 1, 2, 3, 4, 6}, 4,
            new int[] {0, 1, 2, 3}, 0.5),
        Arguments.of("two across switches when nothing closer", PAIRS, new int[] {1, 6}, 2,
            new int[] {1, 6}, 0.0),
        Arguments.of("same switch beats host", PAIRS, new int[] {0, 3, 6}, 2,
            new int[] {0, 3}, 0.5),
        Arguments.of("one GPU beside a busy partner keeps a free pair whole", PAIRS,
            new int[] {0, 1, 2}, 1, new int[] {2}, 1.0),
        Arguments.of("host-only box takes the lowest", HOST_ONLY, new int[] {1, 2, 3}, 2,
            new int[] {1, 2}, 0.0),
        Arguments.of("all free GPUs when the call wants them all", PAIRS,
            new int[] {4, 5, 6, 7}, 4, new int[] {4, 5, 6, 7}, 0.5));
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("cases")
  void picksCloseGpus(String name, GpuTopology topology, int[] free, int want, int[] expected,
      double score) {
    byte[] distances = new byte[topology.gpus() * topology.gpus()];
    for (int a = 0; a < topology.gpus(); a++) {
      for (int b = 0; b < topology.gpus(); b++) {
        distances[a * topology.gpus() + b] = (byte) topology.distance(a, b);
      }
    }
    long mask = 0;
    for (int gpu : free) {
      mask |= 1L << gpu;
    }
    long picked = GpuPicker.pick(distances, topology.gpus(), mask, want);
    assertArrayEquals(expected, GpuPicker.ids(picked));
    assertEquals(score, GpuPicker.topologyScore(distances, topology.gpus(), picked));
  }
}
