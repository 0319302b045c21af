package dev.bulletin.worker;

import dev.bulletin.worker.impl.NvidiaSmi;

/** Decides which GPUs a worker offers from the {@code --gpus} and {@code --simulate-gpus} flags. */
public final class GpuInventoryDetection {
  private GpuInventoryDetection() {}

  /**
   * @param gpus "auto" (every GPU nvidia-smi reports) or a count to use
   * @param simulate when > 0, that many simulated GPUs instead of real ones
   * @throws IllegalArgumentException naming the flag when the request cannot be met
   */
  public static GpuInventory resolve(String gpus, int simulate) {
    if (simulate > 0) {
      return GpuInventory.simulated(simulate);
    }
    if (simulate < 0) {
      throw new IllegalArgumentException("--simulate-gpus must be >= 0, got " + simulate);
    }
    GpuInventory found = NvidiaSmi.detect();
    if (gpus == null || gpus.equals("auto")) {
      return found;
    }
    int wanted;
    try {
      wanted = Integer.parseInt(gpus);
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException("--gpus takes 'auto' or a number, got '" + gpus + "'");
    }
    if (wanted < 0 || wanted > found.count()) {
      throw new IllegalArgumentException("--gpus " + wanted + " asks for more GPUs than nvidia-smi"
          + " reports (" + found.count() + "); on a machine without GPUs use --simulate-gpus N");
    }
    return new GpuInventory(found.names().subList(0, wanted), false, found.topology());
  }
}
