package dev.bulletin.runtime.scheduler.impl;

/**
 * Chooses which free GPUs of a worker a call gets, ranking candidate sets by, in order:
 * <ol>
 *   <li>topology, for a multi-GPU call: the set whose farthest pair is closest (all on NVLink
 *       beats one PCIe switch beats through the host), then the smallest total distance;
 *   <li>resident state (issue 29), among sets equal in topology: the most GPUs that keep the
 *       call's own session's state (used in place, no copy), then the fewest that keep another
 *       session's state (taking one spills it and makes that session's next cell restore it);
 *   <li>packing: GPUs that sit close to busy ones, so free NVLink islands stay whole for the
 *       next multi-GPU call.
 * </ol>
 * So a call never gets worse-placed GPUs to find or spare a state, and a GPU with someone else's
 * state is taken only when no equally close set of free GPUs without it exists. Greedy growth
 * from every free GPU: O(free^2 x gpus) per worker, exact for the usual 2-, 4- and 8-GPU
 * islands; the state adds two bit tests per candidate GPU.
 */
final class GpuPicker {
  private static final int FAR = 3;
  /**
   * A GPU with the call's own state outranks any number of GPUs with others' state avoided: a
   * set's resident rank is {@code OWN * own - others}, with at most 64 GPUs per worker.
   */
  private static final int OWN = 64;

  private GpuPicker() {}

  /** The chosen GPUs as a bit mask, or 0 when {@code want} is 0; no state on any GPU. */
  static long pick(byte[] distances, int gpus, long free, int want) {
    return pick(distances, gpus, free, want, 0, 0);
  }

  /**
   * The chosen GPUs as a bit mask, or 0 when {@code want} is 0. {@code mine}: GPUs that keep the
   * call's own session's state; {@code others}: GPUs that keep another session's state.
   */
  static long pick(byte[] distances, int gpus, long free, int want, long mine, long others) {
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
    int bestResident = Integer.MIN_VALUE;
    int bestAffinity = Integer.MIN_VALUE;
    for (long starts = free; starts != 0; starts &= starts - 1) {
      int start = Long.numberOfTrailingZeros(starts);
      long set = 1L << start;
      int max = 0;
      int sum = 0;
      int resident = resident(start, mine, others);
      int affinity = affinity(distances, gpus, start, busy);
      for (int taken = 1; taken < want; taken++) {
        int pickId = -1;
        int pickMax = Integer.MAX_VALUE;
        int pickSum = Integer.MAX_VALUE;
        int pickResident = Integer.MIN_VALUE;
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
          int cResident = resident + resident(c, mine, others);
          int cAffinity = affinity + affinity(distances, gpus, c, busy);
          if (better(cMax, cSum, cResident, cAffinity, pickMax, pickSum, pickResident,
              pickAffinity)) {
            pickId = c;
            pickMax = cMax;
            pickSum = cSum;
            pickResident = cResident;
            pickAffinity = cAffinity;
          }
        }
        set |= 1L << pickId;
        max = pickMax;
        sum = pickSum;
        resident = pickResident;
        affinity = pickAffinity;
      }
      if (better(max, sum, resident, affinity, bestMax, bestSum, bestResident, bestAffinity)) {
        best = set;
        bestMax = max;
        bestSum = sum;
        bestResident = resident;
        bestAffinity = affinity;
      }
    }
    return best;
  }

  /** The ranking in the class comment: topology, then resident state, then packing. */
  private static boolean better(int max, int sum, int resident, int affinity, int bestMax,
      int bestSum, int bestResident, int bestAffinity) {
    if (max != bestMax) {
      return max < bestMax;
    }
    if (sum != bestSum) {
      return sum < bestSum;
    }
    if (resident != bestResident) {
      return resident > bestResident;
    }
    return affinity > bestAffinity;
  }

  /** {@link #OWN} for a GPU with the call's own state, -1 for one with another's, else 0. */
  private static int resident(int gpu, long mine, long others) {
    long bit = 1L << gpu;
    return (mine & bit) != 0 ? OWN : (others & bit) != 0 ? -1 : 0;
  }

  /**
   * The GPU a fractional call of {@code eighths} shares, or -1 if none has room: the partly
   * shared GPU with the least room that still fits (best fit, so shares pack onto few GPUs and
   * whole GPUs stay free for whole-GPU calls; a shared GPU keeps no idle session's state),
   * else a free GPU chosen as for a one-GPU call.
   * GPUs in {@code reclaiming} (a call is being preempted there) take no new share.
   */
  static int pickShare(byte[] distances, int gpus, long free, byte[] shareFree, long reclaiming,
      int eighths, long mine, long others) {
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
    return Long.numberOfTrailingZeros(pick(distances, gpus, free, 1, mine, others));
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
