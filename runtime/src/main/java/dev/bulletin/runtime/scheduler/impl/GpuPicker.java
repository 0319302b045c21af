package dev.bulletin.runtime.scheduler.impl;

/**
 * Chooses which free GPUs of a worker a call gets. For a multi-GPU call: the set whose farthest
 * pair is closest (all on NVLink beats one PCIe switch beats through the host), then the
 * smallest total distance. Among equal sets, and for one-GPU calls, it takes GPUs that sit close
 * to busy ones, so free NVLink islands stay whole for the next multi-GPU call. Greedy growth
 * from every free GPU: O(free^2 x gpus) per worker, exact for the usual 2-, 4- and 8-GPU
 * islands.
 */
final class GpuPicker {
  private static final int FAR = 3;

  private GpuPicker() {}

  /** The chosen GPUs as a bit mask, or 0 when {@code want} is 0. */
  static long pick(byte[] distances, int gpus, long free, int want) {
    if (want == 0) {
      return 0;
    }
    if (Long.bitCount(free) == want) {
      return free;
    }
    long busy = ~free & (gpus == 64 ? -1L : (1L << gpus) - 1);
    long best = 0;
    int bestMax = Integer.MAX_VALUE;
    int bestSum = Integer.MAX_VALUE;
    int bestAffinity = Integer.MIN_VALUE;
    for (long starts = free; starts != 0; starts &= starts - 1) {
      int start = Long.numberOfTrailingZeros(starts);
      long set = 1L << start;
      int max = 0;
      int sum = 0;
      int affinity = affinity(distances, gpus, start, busy);
      for (int taken = 1; taken < want; taken++) {
        int pickId = -1;
        int pickMax = Integer.MAX_VALUE;
        int pickSum = Integer.MAX_VALUE;
        int pickAffinity = Integer.MIN_VALUE;
        for (long rest = free & ~set; rest != 0; rest &= rest - 1) {
          int c = Long.numberOfTrailingZeros(rest);
          int cMax = max;
          int cSum = sum;
          for (long members = set; members != 0; members &= members - 1) {
            int d = distances[c * gpus + Long.numberOfTrailingZeros(members)];
            cMax = Math.max(cMax, d);
            cSum += d;
          }
          int cAffinity = affinity + affinity(distances, gpus, c, busy);
          if (cMax < pickMax || (cMax == pickMax && (cSum < pickSum
              || (cSum == pickSum && cAffinity > pickAffinity)))) {
            pickId = c;
            pickMax = cMax;
            pickSum = cSum;
            pickAffinity = cAffinity;
          }
        }
        set |= 1L << pickId;
        max = pickMax;
        sum = pickSum;
        affinity = pickAffinity;
      }
      if (max < bestMax || (max == bestMax && (sum < bestSum
          || (sum == bestSum && affinity > bestAffinity)))) {
        best = set;
        bestMax = max;
        bestSum = sum;
        bestAffinity = affinity;
      }
    }
    return best;
  }

  /**
   * The GPU a fractional call of {@code eighths} shares, or -1 if none has room: the partly
   * shared GPU with the least room that still fits (best fit, so shares pack onto few GPUs and
   * whole GPUs stay free for whole-GPU calls), else a free GPU chosen as for a one-GPU call.
   * GPUs in {@code reclaiming} (a call is being preempted there) take no new share.
   */
  static int pickShare(byte[] distances, int gpus, long free, byte[] shareFree, long reclaiming,
      int eighths) {
    int best = -1;
    for (int g = 0; g < gpus; g++) {
      int room = shareFree[g];
      if (((free | reclaiming) & (1L << g)) == 0 && room >= eighths
          && (best < 0 || room < shareFree[best])) {
        best = g;
      }
    }
    if (best >= 0 || free == 0) {
      return best;
    }
    return Long.numberOfTrailingZeros(pick(distances, gpus, free, 1));
  }

  /** 1 for GPUs on NVLink (or a single GPU), 0.5 behind one PCIe switch, 0 through the host. */
  static double topologyScore(byte[] distances, int gpus, long set) {
    int max = 0;
    for (long a = set; a != 0; a &= a - 1) {
      int i = Long.numberOfTrailingZeros(a);
      for (long b = a & (a - 1); b != 0; b &= b - 1) {
        max = Math.max(max, distances[i * gpus + Long.numberOfTrailingZeros(b)]);
      }
    }
    return max <= 1 ? 1.0 : max == 2 ? 0.5 : 0.0;
  }

  /** How close a GPU sits to the busy ones (3 per NVLink neighbour, 2 per switch, 1 host). */
  private static int affinity(byte[] distances, int gpus, int gpu, long busy) {
    int total = 0;
    for (long b = busy; b != 0; b &= b - 1) {
      total += FAR + 1 - distances[gpu * gpus + Long.numberOfTrailingZeros(b)];
    }
    return total;
  }

  static int[] ids(long mask) {
    int[] ids = new int[Long.bitCount(mask)];
    int i = 0;
    for (long m = mask; m != 0; m &= m - 1) {
      ids[i++] = Long.numberOfTrailingZeros(m);
    }
    return ids;
  }
}
