package dev.bulletin.runtime.scheduler.plan;

/**
 * Nanosecond latencies in log-linear buckets (8 per power of two, so a percentile is within
 * 12.5%): fixed memory however many decisions a pass makes. The buckets (4 KiB) are allocated
 * at the first record: every scheduling pass makes two histograms, most passes of a quiet
 * cluster record nothing, and those 8 KiB a pass were a tenth of what a no-op call allocated
 * (its garbage collections showed in the call's p99).
 */
public final class LatencyHistogram {
  private static final int SUB = 8;
  private static final long[] NONE = new long[0];
  private long[] counts = NONE;
  private long count;
  private long max;
  private long total;

  public void record(long nanos) {
    if (counts == NONE) {
      counts = new long[64 * SUB];
    }
    long value = Math.max(1, nanos);
    counts[bucket(value)]++;
    count++;
    total += value;
    max = Math.max(max, value);
  }

  public void merge(LatencyHistogram other) {
    if (other.count == 0) {
      return;
    }
    if (counts == NONE) {
      counts = new long[64 * SUB];
    }
    for (int i = 0; i < other.counts.length; i++) {
      counts[i] += other.counts[i];
    }
    count += other.count;
    total += other.total;
    max = Math.max(max, other.max);
  }

  public long count() {
    return count;
  }

  public long maxNanos() {
    return max;
  }

  public double meanNanos() {
    return count == 0 ? 0 : (double) total / count;
  }

  /** The upper bound of the bucket holding the {@code p}-th percentile (0 < p <= 100). */
  public long percentileNanos(double p) {
    if (count == 0) {
      return 0;
    }
    long rank = (long) Math.ceil(p / 100.0 * count);
    long seen = 0;
    for (int i = 0; i < counts.length; i++) {
      seen += counts[i];
      if (seen >= rank) {
        return Math.min(max, upperBound(i));
      }
    }
    return max;
  }

  private static int bucket(long value) {
    int power = 63 - Long.numberOfLeadingZeros(value);
    if (power < 3) {
      return (int) value;
    }
    int sub = (int) ((value >>> (power - 3)) & (SUB - 1));
    return power * SUB + sub;
  }

  private static long upperBound(int bucket) {
    int power = bucket / SUB;
    int sub = bucket % SUB;
    if (power < 3) {
      return bucket;
    }
    return ((long) (SUB + sub + 1) << (power - 3)) - 1;
  }
}
