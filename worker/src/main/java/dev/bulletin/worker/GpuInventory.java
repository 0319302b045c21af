package dev.bulletin.worker;

import java.util.List;

/**
 * The GPUs a worker offers. Simulated GPUs exist only for scheduling on machines without any:
 * executors see their ids in CUDA_VISIBLE_DEVICES, and everything that shows them says so.
 */
public record GpuInventory(List<String> names, boolean simulated, String topology) {

  /**
   * @param topology how the GPUs are linked, as {@code nvidia-smi topo -m} prints it (simulated
   *     GPUs get a made-up one: pairs joined by NVLink); empty when unknown
   */
  public GpuInventory {
    names = List.copyOf(names);
    topology = topology == null ? "" : topology;
  }

  public GpuInventory(List<String> names, boolean simulated) {
    this(names, simulated, "");
  }

  public int count() {
    return names.size();
  }

  public static GpuInventory none() {
    return new GpuInventory(List.of(), false);
  }

  public static GpuInventory simulated(int count) {
    if (count < 0) {
      throw new IllegalArgumentException("--simulate-gpus must be >= 0, got " + count);
    }
    return new GpuInventory(
        java.util.stream.IntStream.range(0, count).mapToObj(i -> "simulated GPU " + i).toList(),
        count > 0, simulatedTopology(count));
  }

  /** NVLink within each pair (0-1, 2-3, ...), the host between pairs: a common 8-GPU layout. */
  static String simulatedTopology(int count) {
    StringBuilder out = new StringBuilder("      ");
    for (int gpu = 0; gpu < count; gpu++) {
      out.append("\tGPU").append(gpu);
    }
    out.append('\n');
    for (int a = 0; a < count; a++) {
      out.append("GPU").append(a);
      for (int b = 0; b < count; b++) {
        out.append('\t').append(a == b ? "X" : a / 2 == b / 2 ? "NV4" : "SYS");
      }
      out.append('\n');
    }
    return out.toString();
  }
}
