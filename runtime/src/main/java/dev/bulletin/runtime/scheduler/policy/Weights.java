package dev.bulletin.runtime.scheduler.policy;

/**
 * How much each score counts when several workers can take a call. Every score is in 0..1.
 *
 * @param topology a multi-GPU call's GPUs sit close (1 NVLink, 0.5 one PCIe switch, 0 host)
 * @param locality share of the call's input bytes already in the worker's store
 * @param packing how full the worker is after the call (best fit keeps whole workers free)
 * @param localityMinBytes inputs smaller than this in total are not worth steering for
 */
public record Weights(double topology, double locality, double packing, long localityMinBytes) {

  public Weights {
    for (double weight : new double[] {topology, locality, packing}) {
      if (!(weight >= 0) || Double.isInfinite(weight)) {
        throw new IllegalArgumentException("scheduler.weights.* must be >= 0, got " + weight);
      }
    }
    if (localityMinBytes < 0) {
      throw new IllegalArgumentException("scheduler.locality_min_bytes must be >= 0");
    }
  }

  public static Weights defaults() {
    return new Weights(3, 2, 1, 1L << 20);
  }
}
