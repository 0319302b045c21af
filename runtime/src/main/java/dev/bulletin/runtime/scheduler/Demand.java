package dev.bulletin.runtime.scheduler;

import dev.bulletin.protocol.Text;

/**
 * What one call asks for. Validated here so every stage can trust it.
 *
 * @param gpus whole GPUs (0 for a CPU call or a fractional one)
 * @param gpuEighths a share of one GPU in eighths, 1..7 (0.125 .. 0.875), with {@code gpus} 0;
 *     0 for whole GPUs. A fractional call shares its GPU with other fractional calls up to
 *     eight eighths and never with a whole-GPU call (docs/scheduler.md, "Fractional GPUs").
 */
public record Demand(int gpus, double cpus, long memoryBytes, int gpuEighths) {
  /** Fractions are counted in eighths of a GPU. */
  public static final int EIGHTHS = 8;

  public Demand {
    if (gpus < 0) {
      throw new IllegalArgumentException("gpus must be >= 0, got " + gpus);
    }
    if (gpuEighths < 0 || gpuEighths >= EIGHTHS) {
      throw new IllegalArgumentException("gpu_eighths must be within 0..7 (a share of one GPU"
          + " below 1), got " + gpuEighths);
    }
    if (gpuEighths > 0 && gpus > 0) {
      throw new IllegalArgumentException("gpus=" + (gpus + gpuEighths / 8.0) + " is refused:"
          + " fractions are for less than one GPU; ask for a whole number of GPUs or a"
          + " multiple of 1/8 below 1 (0.125, 0.25, 0.5, ...)");
    }
    if (!(cpus > 0) || Double.isInfinite(cpus)) {
      throw new IllegalArgumentException("cpus must be > 0, got " + cpus);
    }
    if (memoryBytes < 0) {
      throw new IllegalArgumentException("memory must be >= 0 bytes, got " + memoryBytes);
    }
  }

  /** Whole GPUs only (the shape before fractions). */
  public Demand(int gpus, double cpus, long memoryBytes) {
    this(gpus, cpus, memoryBytes, 0);
  }

  /**
   * The demand for {@code gpus} as a user writes it: a whole number, or a multiple of 1/8 below
   * 1. Anything else is refused with what to ask for instead.
   */
  public static Demand ofGpus(double gpus, double cpus, long memoryBytes) {
    return new Demand((int) Math.floor(gpus), cpus, memoryBytes, eighthsOf(gpus));
  }

  /** The eighths of a fractional request below 1 (0 for a whole number); refuses the rest. */
  public static int eighthsOf(double gpus) {
    if (!(gpus >= 0) || Double.isInfinite(gpus)) {
      throw new IllegalArgumentException("gpus must be >= 0, got " + gpus);
    }
    if (gpus == Math.rint(gpus)) {
      return 0;
    }
    if (gpus > 1) {
      throw new IllegalArgumentException("gpus=" + Text.number(gpus) + " is refused: fractions"
          + " are for less than one GPU (a share of one GPU: 0.125, 0.25, 0.5, ...); ask for "
          + (int) Math.ceil(gpus) + " whole GPUs instead");
    }
    double eighths = gpus * EIGHTHS;
    if (eighths != Math.rint(eighths)) {
      throw new IllegalArgumentException("gpus=" + Text.number(gpus) + " is refused: a share"
          + " of a GPU is a multiple of 1/8 (0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875)");
    }
    return (int) eighths;
  }

  /** A share of one GPU (not whole GPUs). */
  public boolean fractional() {
    return gpuEighths > 0;
  }

  /** GPUs as charged by quotas, credits and usage: whole GPUs, or the fraction of one. */
  public double gpuShare() {
    return fractional() ? gpuEighths / (double) EIGHTHS : gpus;
  }

  /** GPUs the call runs on: its whole GPUs, or the one it shares. */
  public int gpusTouched() {
    return fractional() ? 1 : gpus;
  }

  @Override
  public String toString() {
    return Text.count(gpuShare(), "GPU") + ", " + Text.count(cpus, "CPU")
        + (memoryBytes > 0 ? ", " + Text.bytes(memoryBytes) + " memory" : "");
  }
}
