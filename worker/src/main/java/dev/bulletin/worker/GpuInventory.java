package dev.bulletin.worker;

import java.util.List;

/**
 * The GPUs a worker offers. Simulated GPUs exist only for scheduling on machines without any:
 * executors see their ids in CUDA_VISIBLE_DEVICES, and everything that shows them says so.
 */
public record GpuInventory(List<String> names, boolean simulated) {

  public GpuInventory {
    names = List.copyOf(names);
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
        count > 0);
  }
}
