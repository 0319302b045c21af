package dev.bulletin.worker;

import java.util.Map;

/**
 * How busy a worker's GPUs are, from utilisation samples taken every second or so, and how much
 * of that each call used: a GPU's utilisation is attributed to the call that holds it.
 */
public interface GpuUsage {

  /** Each GPU's utilisation at the last sample, 0 to 1, by GPU index; empty with no GPUs. */
  Map<Integer, Double> current();

  /**
   * GPU-seconds the call's GPUs were busy while it ran (utilisation times sample interval,
   * summed over its GPUs), and forgets the call. 0 for an unknown call or a CPU call.
   */
  double takeBusyGpuSeconds(String taskId);

  /** Where the samples come from, e.g. "nvidia-smi" or "simulated: executor CPU share". */
  String source();

  /** No samples: a worker without GPUs. */
  GpuUsage NONE = new GpuUsage() {
    @Override
    public Map<Integer, Double> current() {
      return Map.of();
    }

    @Override
    public double takeBusyGpuSeconds(String taskId) {
      return 0;
    }

    @Override
    public String source() {
      return "none";
    }
  };
}
