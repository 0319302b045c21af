package dev.bulletin.runtime.scheduler.impl;

import dev.bulletin.protocol.Text;
import dev.bulletin.runtime.scheduler.plan.FilterReason;
import dev.bulletin.runtime.scheduler.plan.WaitCode;
import dev.bulletin.runtime.scheduler.policy.PolicyConfig;
import dev.bulletin.runtime.scheduler.policy.Weights;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;

/**
 * Finds the worker for a call that passed the call-level checks: gathers candidates (workers
 * holding its inputs, the worker keeping its resident values, then the best-fit free-GPU buckets up to the policy's candidate limit),
 * runs the worker filters, lets the {@link GpuPicker} choose GPUs on each (its own session's
 * state first, others' state last), adds up the weighted
 * scores and keeps the best. The workers the filters turn down are counted per
 * {@link FilterReason}; the counts decide what a call that found none waits for. A shape (GPUs,
 * CPUs, memory, walltime) that found no worker is remembered for the rest of the pass: capacity
 * only shrinks during a pass, so every call asking at least as much waits at once, without a
 * scan ("stop early per shape").
 */
final class Selector {
  private static final int LOCALITY_OBJECTS = 4;
  private static final FilterReason[] REASONS = FilterReason.values();

  private final WorkerFilter[] filters;
  private final WorkerScore[] scores;
  /** Each score's policy weight, in {@link #scores} order. */
  private final double[] weights;
  private final ClusterIndex index;
  private final Weights policyWeights;
  private final int candidateLimit;
  private final long nowMillis;
  private final List<Failed> failed = new ArrayList<>();
  private int[] candidates = new int[16];
  private final int[] seen;
  private int stamp;
  /** Workers turned down per {@link FilterReason}: for the call being selected, and the pass. */
  private final int[] filteredNow = new int[REASONS.length];
  private final int[] filteredInPass = new int[REASONS.length];
  /** The filter that turned the worker down, set when {@link #accepts} says false. */
  private WorkerFilter rejectedBy;

  /** Set by a successful {@link #select}. */
  int chosenWorker;
  long chosenGpus;

  private record Failed(int units, double cpus, long memory, long walltime, boolean expiry,
      boolean reserved) {}

  /** One per pass: the remembered shapes hold only while capacity only shrinks. */
  Selector(WorkerFilter[] filters, WorkerScore[] scores, ClusterIndex index, PolicyConfig policy,
      long nowMillis) {
    this.filters = filters;
    this.scores = scores;
    this.index = index;
    this.policyWeights = policy.weights();
    this.candidateLimit = policy.candidateLimit();
    this.nowMillis = nowMillis;
    this.weights = new double[scores.length];
    for (int i = 0; i < scores.length; i++) {
      weights[i] = scores[i].weight(policyWeights);
    }
    this.seen = new int[index.size];
  }

  /** True with {@link #chosenWorker}/{@link #chosenGpus} set, else the row's wait is set. */
  boolean select(CallRow row) {
    for (Failed f : failed) {
      if (row.units >= f.units && row.cpus >= f.cpus && row.memory >= f.memory
          && row.walltimeMillis >= f.walltime) {
        explain(row, f.expiry, f.reserved);
        return false;
      }
    }
    if (row.keeper >= 0) {
      return onKeeper(row, row.keeper);
    }
    int found = 0;
    java.util.Arrays.fill(filteredNow, 0);
    stamp++;
    if (row.inputBytes > 0 && row.inputBytes >= policyWeights.localityMinBytes()) {
      for (String object : largestInputs(row)) {
        for (int w : index.holders(object)) {
          if (seen[w] != stamp && index.usable[w] && hasGpuRoom(row, w) && accepts(row, w)) {
            seen[w] = stamp;
            found = add(found, w);
          }
        }
      }
    }
    // The worker that keeps the call's resident values is scored whatever the bucket scan
    // finds: past the candidate limit it would otherwise never be seen on a large cluster.
    Integer preferred = index.byId.get(row.call.preferredWorker());
    if (preferred != null && seen[preferred] != stamp && index.usable[preferred]
        && hasGpuRoom(row, preferred) && accepts(row, preferred)) {
      seen[preferred] = stamp;
      found = add(found, preferred);
    }
    int baseline = found;
    scan:
    // A share of a GPU may fit a worker with no GPU free (a partly shared one): from bucket 0,
    // the fullest workers first, which packs shares together.
    for (int f = row.fractional() ? 0 : row.gpus; f <= index.maxGpus; f++) {
      ClusterIndex.IntBag bucket = index.bucket(f);
      for (int i = 0; i < bucket.size(); i++) {
        int w = bucket.get(i);
        if (seen[w] == stamp || f == 0 && !hasGpuRoom(row, w)) {
          continue;
        }
        if (accepts(row, w)) {
          found = add(found, w);
          if (found - baseline >= candidateLimit) {
            break scan;
          }
        } else {
          filteredNow[rejectedBy.reason.ordinal()]++;
        }
      }
    }
    for (int r = 0; r < REASONS.length; r++) {
      filteredInPass[r] += filteredNow[r];
    }
    if (found == 0) {
      boolean expiry = onlyExpiryFiltered();
      boolean reserved = filteredNow[FilterReason.RESERVED.ordinal()] > 0;
      failed.add(new Failed(row.units, row.cpus, row.memory, row.walltimeMillis, expiry,
          reserved));
      explain(row, expiry, reserved);
      return false;
    }
    double best = Double.NEGATIVE_INFINITY;
    for (int i = 0; i < found; i++) {
      int w = candidates[i];
      long gpus = pickGpus(row, w, index.ownState(w, row.call.residentSession()));
      double score = 0;
      for (int s = 0; s < scores.length; s++) {
        score += weights[s] * scores[s].score(row, w, gpus, index, policyWeights);
      }
      if (score > best) {
        best = score;
        chosenWorker = w;
        chosenGpus = gpus;
      }
    }
    return true;
  }

  /**
   * A call whose values are live on worker {@code w}'s GPUs runs there or waits: a value on a
   * GPU moves only once spilled, and the executor that keeps it spills only while idle. On that
   * worker any free GPUs do (the agent spills the user's other idle executors first and the call
   * restores what they kept); what it waits for is a GPU with its state to be free, as that one
   * is taken by its owner's own call in the keeping executor. Its wait is not remembered as a
   * failed shape: it says nothing about other workers.
   */
  private boolean onKeeper(CallRow row, int w) {
    long mine = index.ownState(w, row.call.residentSession());
    boolean stateFree = (mine & ~index.freeMask[w]) == 0;
    if (index.usable[w] && stateFree && hasGpuRoom(row, w) && accepts(row, w)) {
      chosenWorker = w;
      chosenGpus = pickGpus(row, w, mine);
      return true;
    }
    String where = "values it reads are kept on "
        + (mine == 0 ? "worker " : (Long.bitCount(mine) == 1 ? "GPU " : "GPUs ") + gpuList(mine)
            + " of worker ") + index.workers[w].id()
        + " (live, not spilled: a value on a GPU moves only once it is spilled)";
    String why = !index.usable[w] ? "; that worker is draining, and it waits until they are"
        + " spilled there"
        : !stateFree ? "; a GPU that keeps them is taken (by your own call, in the executor"
            + " that keeps them), and it runs there once the GPU is free"
        : "; it runs there once that worker has room";
    row.waitWith(WaitCode.STATE_ON_GPU, where + why);
    return false;
  }

  /**
   * The GPUs of worker {@code w} the call would take. GPUs keeping a session's state (issue
   * 29): the call's own ({@code mine}), to take first, and others', to avoid; both 0 on a worker
   * that keeps none.
   */
  private long pickGpus(CallRow row, int w, long mine) {
    long others = index.stateMask[w] & ~mine;
    return row.fractional()
        ? 1L << GpuPicker.pickShare(index.distances[w], index.gpuCount[w], index.freeMask[w],
            index.shareFree[w], index.reclaiming[w], row.eighths, mine, others)
        : GpuPicker.pick(index.distances[w], index.gpuCount[w], index.freeMask[w], row.gpus,
            mine, others);
  }

  private static String gpuList(long mask) {
    StringBuilder ids = new StringBuilder();
    for (long m = mask; m != 0; m &= m - 1) {
      ids.append(ids.length() == 0 ? "" : ", ").append(Long.numberOfTrailingZeros(m));
    }
    return ids.toString();
  }

  /** The worker has the GPUs free, or for a share, a GPU with that many eighths free. */
  private boolean hasGpuRoom(CallRow row, int w) {
    return row.fractional() ? index.mostShareFree(w) >= row.eighths
        : index.freeCount[w] >= row.gpus;
  }

  /** Workers each filter turned down in this pass so far (the pass's stats). */
  Map<FilterReason, Integer> filtered() {
    Map<FilterReason, Integer> counts = new EnumMap<>(FilterReason.class);
    for (FilterReason reason : REASONS) {
      if (filteredInPass[reason.ordinal()] > 0) {
        counts.put(reason, filteredInPass[reason.ordinal()]);
      }
    }
    return counts;
  }

  /**
   * The call found no worker, and the walltime filter alone turned workers down: every worker
   * with the GPUs free had the CPUs and memory too, and leaves too soon (a wait for a worker
   * that stays up, not for capacity).
   */
  private boolean onlyExpiryFiltered() {
    return filteredNow[FilterReason.WORKER_EXPIRY.ordinal()] > 0
        && filteredNow[FilterReason.CPUS.ordinal()] == 0
        && filteredNow[FilterReason.MEMORY.ordinal()] == 0
        && filteredNow[FilterReason.RESERVED.ordinal()] == 0;
  }

  /** True if every filter accepts the worker; else {@link #rejectedBy} is the one that refused. */
  private boolean accepts(CallRow row, int w) {
    for (WorkerFilter filter : filters) {
      if (!filter.accepts(row, w, index, nowMillis)) {
        rejectedBy = filter;
        return false;
      }
    }
    return true;
  }

  private int add(int found, int w) {
    if (found == candidates.length) {
      candidates = java.util.Arrays.copyOf(candidates, found * 2);
    }
    candidates[found] = w;
    return found + 1;
  }

  private static List<String> largestInputs(CallRow row) {
    return row.call.inputs().entrySet().stream()
        .sorted(Map.Entry.<String, Long>comparingByValue(Comparator.reverseOrder())
            .thenComparing(Map.Entry.comparingByKey()))
        .limit(LOCALITY_OBJECTS).map(Map.Entry::getKey).toList();
  }

  /** What a capacity wait's words depend on. */
  private record Wording(int units, double cpus, long memory, long walltime, boolean expiry,
      boolean reserved, int mostFree, boolean shareRoom, String borrowReason) {}

  private final Map<Wording, Verdict> wordings = new java.util.HashMap<>();
  /** The smallest share (in eighths) no GPU had room for in this pass; 9: none known. */
  private int noShareRoomFrom = 9;

  /** Names what is missing, in the caller's words (built once per distinct wording). */
  private void explain(CallRow row, boolean expiry, boolean reserved) {
    int mostFree = index.maxFree();
    boolean shareRoom = row.fractional() && anyShareRoom(row.eighths);
    Wording key = new Wording(row.units, row.cpus, row.memory,
        expiry || reserved ? row.walltimeMillis : 0, expiry, reserved, mostFree, shareRoom,
        row.borrowReason);
    Verdict verdict = wordings.get(key);
    if (verdict == null) {
      verdict = wording(row, expiry, reserved, mostFree, shareRoom);
      wordings.put(key, verdict);
    }
    row.waitWith(verdict.code, verdict.reason);
  }

  private Verdict wording(CallRow row, boolean expiry, boolean reserved, int mostFree,
      boolean shareRoom) {
    WaitCode code;
    String reason;
    if (index.usableWorkers() == 0) {
      code = WaitCode.NO_WORKERS;
      reason = index.size == 0 ? "no worker has joined the cluster"
          : "every worker is draining; waiting for a worker to join";
    } else {
      String gpus = row.fractional() ? Text.number(row.share) + " of a GPU"
          : Text.count(row.gpus, "GPU");
      if (row.fractional() && !shareRoom) {
        code = WaitCode.CAPACITY;
        reason = "no GPU has " + Text.number(row.share) + " of a GPU free to share (a GPU is"
            + " shared only among fractional calls, up to 1 in all, and never with a whole-GPU"
            + " call)";
      } else if (!row.fractional() && mostFree < row.gpus) {
        code = WaitCode.CAPACITY;
        reason = "no worker has " + gpus + " free (most free on one worker: "
            + mostFree + ")";
      } else if (reserved) {
        code = WaitCode.RESERVED;
        reason = "the workers with " + gpus + " free are reserved for older calls of "
            + Text.count(index.reservations.minGpus(), "GPU") + " or more (backfill), and"
            + " its walltime of " + Text.duration(Duration.ofMillis(row.walltimeMillis))
            + " runs past the reservations' start";

      } else if (expiry) {
        code = WaitCode.WORKER_EXPIRY;
        reason = "no worker" + (row.gpus > 0 ? " with " + gpus + " free" : "")
            + " stays up for the walltime of "
            + Text.duration(Duration.ofMillis(row.walltimeMillis));
      } else {
        code = WaitCode.CAPACITY;
        reason = "no worker" + (row.gpus > 0 ? " with " + gpus + " free" : "") + " has "
            + Text.count(row.cpus, "CPU")
            + (row.memory > 0 ? " and " + Text.bytes(row.memory) + " memory" : "") + " free";
      }
    }
    if (row.borrowReason != null) {
      code = WaitCode.NO_IDLE_CAPACITY;
      reason = row.borrowReason + "; over quota it runs only as preemptible on idle GPUs, and "
          + reason;
    }
    return Verdict.waitFor(code, reason);
  }

  /**
   * Whether some usable worker has a GPU with {@code eighths} free. A "no" holds for the rest
   * of the pass (capacity only shrinks) and for every larger share: remembered, so a deep queue
   * of shares that wait scans the workers once.
   */
  private boolean anyShareRoom(int eighths) {
    if (eighths >= noShareRoomFrom) {
      return false;
    }
    for (int w = 0; w < index.size; w++) {
      if (index.usable[w] && index.mostShareFree(w) >= eighths) {
        return true;
      }
    }
    noShareRoomFrom = eighths;
    return false;
  }
}
