package dev.bulletin.runtime.workers;

import dev.bulletin.protocol.CallEnded;
import dev.bulletin.protocol.GpuUtilisationSample;
import dev.bulletin.protocol.WorkerHeartbeat;
import dev.bulletin.worker.GpuUsage;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * A remote worker's GPU usage as its messages report it: utilisation from its heartbeats, a
 * call's GPU-seconds busy from its CallEnded. Read and written on the control plane's loop.
 */
final class ReportedGpuUsage implements GpuUsage {
  private Map<Integer, Double> current = Map.of();
  private final Map<String, Double> ended = new HashMap<>();

  void heartbeat(WorkerHeartbeat beat) {
    List<GpuUtilisationSample> samples = beat.getGpuUtilisationList();
    Map<Integer, Double> now = new HashMap<>();
    for (GpuUtilisationSample sample : samples) {
      now.put(sample.getGpu(), Math.max(0, Math.min(1, sample.getUtilisation())));
    }
    current = Map.copyOf(now);
  }

  /** Before the call's outcome completes, so the control plane finds its busy seconds. */
  void ended(CallEnded ended) {
    double busy = ended.getGpuSecondsBusy();
    if (busy > 0 && Double.isFinite(busy)) {
      this.ended.put(ended.getTaskId(), busy);
    }
  }

  @Override
  public Map<Integer, Double> current() {
    return current;
  }

  @Override
  public double takeBusyGpuSeconds(String taskId) {
    Double busy = ended.remove(taskId);
    return busy == null ? 0 : busy;
  }

  @Override
  public String source() {
    return "worker heartbeats";
  }
}
