package dev.bulletin.runtime.scheduler.impl;

/**
 * A worker-level score in 0..1 for a worker that passed the filters, given the GPUs the
 * {@link GpuPicker} chose on it; the selection adds them up with the policy's weights.
 */
interface WorkerScore {
  double score(CallRow row, int worker, long gpus, Pass pass);

  /** A multi-GPU call's GPUs sit close: 1 NVLink, 0.5 one PCIe switch, 0 through the host. */
  WorkerScore TOPOLOGY = (row, w, gpus, pass) -> row.gpus < 2 ? 1.0
      : GpuPicker.topologyScore(pass.index.distances[w], pass.index.gpuCount[w], gpus);

  /** Share of the call's input bytes already in the worker's store. */
  WorkerScore LOCALITY = (row, w, gpus, pass) -> {
    if (row.inputBytes < pass.policy.weights().localityMinBytes() || row.inputBytes == 0) {
      return 0;
    }
    long held = 0;
    java.util.Map<String, Long> objects = pass.index.workers[w].heldObjects();
    for (var input : row.call.inputs().entrySet()) {
      if (objects.containsKey(input.getKey())) {
        held += input.getValue();
      }
    }
    return (double) held / row.inputBytes;
  };

  /** How full the worker is after the call: best fit keeps whole workers free for big calls. */
  WorkerScore PACKING = (row, w, gpus, pass) -> {
    ClusterIndex index = pass.index;
    if (row.gpus > 0) {
      return 1.0 - (double) (index.freeCount[w] - row.gpus) / index.gpuCount[w];
    }
    double total = index.workers[w].cpus();
    return total <= 0 ? 0 : 1.0 - (index.freeCpus[w] - row.cpus) / total;
  };
}
