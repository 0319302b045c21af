package dev.bulletin.runtime.scheduler.impl;

import dev.bulletin.runtime.scheduler.policy.Weights;
import java.util.function.ToDoubleFunction;

/**
 * A worker-level score in 0..1 for a worker that passed the filters, given the GPUs the
 * {@link GpuPicker} chose on it; the selection adds them up, each times its policy weight.
 */
enum WorkerScore {
  /** A multi-GPU call's GPUs sit close: 1 NVLink, 0.5 one PCIe switch, 0 through the host. */
  TOPOLOGY(Weights::topology) {
    @Override
    double score(CallRow row, int w, long gpus, ClusterIndex index, Weights weights) {
      return row.gpus < 2 ? 1.0
          : GpuPicker.topologyScore(index.distances[w], index.gpuCount[w], gpus);
    }
  },

  /** Share of the call's input bytes already in the worker's store. */
  LOCALITY(Weights::locality) {
    @Override
    double score(CallRow row, int w, long gpus, ClusterIndex index, Weights weights) {
      if (row.inputBytes < weights.localityMinBytes() || row.inputBytes == 0) {
        return 0;
      }
      long held = 0;
      java.util.Map<String, Long> objects = index.workers[w].heldObjects();
      for (var input : row.call.inputs().entrySet()) {
        if (objects.containsKey(input.getKey())) {
          held += input.getValue();
        }
      }
      return (double) held / row.inputBytes;
    }
  },

  /**
   * The worker that keeps the resident values the call reads (a %%bulletin session's state on
   * its GPU, issue 29): there they are used in place; elsewhere they must be restored first.
   * Data locality's weight, since they are the call's data.
   */
  RESIDENT(Weights::locality) {
    @Override
    double score(CallRow row, int w, long gpus, ClusterIndex index, Weights weights) {
      return index.workers[w].id().equals(row.call.preferredWorker()) ? 1.0 : 0.0;
    }
  },

  /**
   * Share of the call's GPUs that keep no other session's state (issue 29): 1 when the call
   * spills nobody's state (or takes no GPU), 0 when every GPU it gets keeps someone else's. The
   * {@link GpuPicker} already spares such GPUs within a worker; this term prefers, among workers
   * otherwise alike, one where it can. Its weight is {@link Spare#WEIGHT} of packing's.
   */
  STATE_SPARED(weights -> weights.packing() * Spare.WEIGHT) {
    @Override
    double score(CallRow row, int w, long gpus, ClusterIndex index, Weights weights) {
      if (index.stateMask[w] == 0 || gpus == 0) {
        return 1.0;
      }
      long others = index.stateMask[w] & ~index.ownState(w, row.call.residentSession());
      return 1.0 - (double) Long.bitCount(gpus & others) / Long.bitCount(gpus);
    }
  },

  /** How full the worker is after the call: best fit keeps whole workers free for big calls. */
  PACKING(Weights::packing) {
    @Override
    double score(CallRow row, int w, long gpus, ClusterIndex index, Weights weights) {
      if (row.fractional()) {
        // A share on a GPU already shared (0.5..1, fuller after it is higher) beats any share
        // that opens a free GPU (0..0.5, by how full the worker is): bin-packing.
        int gpu = Long.numberOfTrailingZeros(gpus);
        if ((index.freeMask[w] & gpus) == 0) {
          return 1.0 - (index.shareFree[w][gpu] - row.eighths) / 16.0;
        }
        return 0.5 * (1.0 - (double) (index.freeCount[w] - 1) / index.gpuCount[w]);
      }
      if (row.gpus > 0) {
        return 1.0 - (double) (index.freeCount[w] - row.gpus) / index.gpuCount[w];
      }
      double total = index.workers[w].cpus();
      return total <= 0 ? 0 : 1.0 - (index.freeCpus[w] - row.cpus) / total;
    }
  };

  /** Holds {@link #STATE_SPARED}'s weight (an enum constant cannot read a later static field). */
  static final class Spare {
    /**
     * Half of packing's weight (0.5 with the defaults). A spilled state costs its session a
     * restore (0.18 s for 2 GiB) and the hit of its next cell; so sparing one outweighs best fit
     * by up to 4 GPUs of an 8-GPU worker (packing's step is 1/8 per GPU), but a call still takes
     * the GPU with state on a nearly full worker rather than open an idle one that big calls
     * need (7 GPUs of packing). It stays below every term that changes how the call runs:
     * topology (3 x 0.5 per step), data locality and the state's own worker (2 each), so it
     * never pulls a call off its inputs, its state or close GPUs. In the lab week (docs/
     * scheduler.md) 0.05 (ties of packing only) gave 63-68 % hits, 0.5 66-72 %, 1.0 (a whole
     * worker of packing) 73-77 %; the waits moved within the week-to-week noise at all three.
     */
    static final double WEIGHT = 0.5;

    private Spare() {}
  }

  private final ToDoubleFunction<Weights> weight;

  WorkerScore(ToDoubleFunction<Weights> weight) {
    this.weight = weight;
  }

  abstract double score(CallRow row, int worker, long gpus, ClusterIndex index, Weights weights);

  /** This score's weight in the policy. */
  double weight(Weights weights) {
    return weight.applyAsDouble(weights);
  }
}
