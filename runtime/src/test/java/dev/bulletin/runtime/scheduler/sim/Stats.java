package dev.bulletin.runtime.scheduler.sim;

import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.function.ToDoubleFunction;

/** Percentiles, utilisation integrals and Jain's index over simulated calls. */
final class Stats {
  private Stats() {}

  static double percentile(double[] values, double p) {
    if (values.length == 0) {
      return Double.NaN;
    }
    double[] sorted = values.clone();
    Arrays.sort(sorted);
    int rank = (int) Math.ceil(p / 100.0 * sorted.length) - 1;
    return sorted[Math.max(0, Math.min(sorted.length - 1, rank))];
  }

  static double[] of(List<SimCall> calls, ToDoubleFunction<SimCall> value) {
    return calls.stream().mapToDouble(value).toArray();
  }

  /**
   * The integral of min(capacity, GPUs asked for by calls submitted and not finished), in
   * GPU-seconds: the most useful work the cluster could have done while demand existed.
   */
  static double demandGpuSeconds(List<SimCall> calls, int capacity) {
    long[][] events = new long[calls.size() * 2][];
    int n = 0;
    for (SimCall call : calls) {
      if (call.done()) {
        events[n++] = new long[] {call.submitMillis, call.gpus};
        events[n++] = new long[] {call.endMillis, -call.gpus};
      }
    }
    events = Arrays.copyOf(events, n);
    Arrays.sort(events, (a, b) -> a[0] != b[0] ? Long.compare(a[0], b[0]) : Long.compare(a[1], b[1]));
    double total = 0;
    long demand = 0;
    for (int i = 0; i < n; i++) {
      if (i > 0) {
        total += Math.min(capacity, demand) * (events[i][0] - events[i - 1][0]) / 1000.0;
      }
      demand += events[i][1];
    }
    return total;
  }

  /** Jain's fairness index: 1 when every x is equal, 1/n when one gets everything. */
  static double jain(double[] xs) {
    double sum = 0;
    double squares = 0;
    for (double x : xs) {
      sum += x;
      squares += x * x;
    }
    return squares == 0 ? 1 : sum * sum / (xs.length * squares);
  }

  static String minutes(double seconds) {
    if (Double.isNaN(seconds)) {
      return "-";
    }
    if (seconds < 60) {
      return String.format(Locale.ROOT, "%.1fs", seconds);
    }
    if (seconds < 3600) {
      return String.format(Locale.ROOT, "%.1fm", seconds / 60);
    }
    return String.format(Locale.ROOT, "%.2fh", seconds / 3600);
  }

  static String micros(long nanos) {
    return String.format(Locale.ROOT, "%.1fus", nanos / 1000.0);
  }
}
