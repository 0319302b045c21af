package dev.bulletin.runtime.scheduler.plan;

/**
 * Nanosecond latencies in log-linear buckets (8 per power of two, so a percentile is within
 * 12.5%): fixed memory however many decisions a pass makes.
 */
public final class LatencyHistogram {
  private static final int SUB = 8;
  private final long[] counts = new long[64 * SUB];
  private long count;
  private long max;
  private long total;

  public void record(long nanos) {
    long value = Math.max(1, nanos);
    counts[bucket(value)]++;
    count++;
    total += value;
    max = Math.max(max, value);
  }

  public void merge(LatencyHistogram other) {
    for (int i = 0; i < counts.length; i++) {
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
