package dev.bulletin.runtime.scheduler;

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
    return gpus + " GPU" + (gpus == 1 ? "" : "s") + ", " + Formats.cpus(cpus) + " CPU"
        + (cpus == 1 ? "" : "s") + (memoryBytes > 0 ? ", " + Formats.bytes(memoryBytes) + " memory" : "");
  }
}
