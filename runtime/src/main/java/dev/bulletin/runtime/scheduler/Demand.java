package dev.bulletin.runtime.scheduler;

import dev.bulletin.protocol.Text;
/** What one call asks for. Validated here so every stage can trust it. */
public record Demand(int gpus, double cpus, long memoryBytes) {
  public Demand {
    if (gpus < 0) {
      throw new IllegalArgumentException("gpus must be >= 0, got " + gpus);
    }
    if (!(cpus > 0) || Double.isInfinite(cpus)) {
      throw new IllegalArgumentException("cpus must be > 0, got " + cpus);
    }
    if (memoryBytes < 0) {
      throw new IllegalArgumentException("memory must be >= 0 bytes, got " + memoryBytes);
    }
  }

  @Override
  public String toString() {
    return Text.count(gpus, "GPU") + ", " + Text.count(cpus, "CPU")
        + (memoryBytes > 0 ? ", " + Text.bytes(memoryBytes) + " memory" : "");
  }
}
