package dev.bulletin.runtime.scheduler.impl;

import dev.bulletin.protocol.Text;
import dev.bulletin.runtime.scheduler.plan.WaitCode;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;

/**
 * Finds the worker for a call that passed the call-level checks: gathers candidates (workers
 * holding its inputs, then the best-fit free-GPU buckets up to the policy's candidate limit),
 * runs the worker filters, lets the {@link GpuPicker} choose GPUs on each, adds up the weighted
 * scores and keeps the best. A shape (pool, GPUs, CPUs, memory, walltime) that found no worker
 * is remembered for the rest of the pass: capacity only shrinks during a pass, so every call
 * asking at least as much waits at once, without a scan ("stop early per shape").
 */
final class Selector {
  private static final int LOCALITY_OBJECTS = 4;

  private final WorkerFilter[] filters;
  private final WorkerScore[] scores;
  private final List<Failed> failed = new ArrayList<>();
  private int[] candidates = new int[16];
  private final int[] seen;
  private int stamp;

  /** Set by a successful {@link #select}. */
  int chosenWorker;
  long chosenGpus;

  private record Failed(int pool, int gpus, double cpus, long memory, long walltime,
      boolean expiry) {}

  /** One per pass: the remembered shapes hold only while capacity only shrinks. */
  Selector(WorkerFilter[] filters, WorkerScore[] scores, int workers) {
    this.filters = filters;
    this.scores = scores;
    this.seen = new int[workers];
  }

  /** True with {@link #chosenWorker}/{@link #chosenGpus} set, else the row's wait is set. */
  boolean select(CallRow row, Pass pass) {
    for (Failed f : failed) {
      if ((f.pool == CallRow.ANY_POOL || f.pool == row.pool) && row.gpus >= f.gpus
          && row.cpus >= f.cpus && row.memory >= f.memory && row.walltimeMillis >= f.walltime) {
        explain(row, pass, f.expiry);
        return false;
      }
    }
    ClusterIndex index = pass.index;
    int limit = pass.policy.candidateLimit();
    int found = 0;
    int expiryRejects = 0;
    int otherRejects = 0;
    stamp++;
    if (row.inputBytes > 0 && row.inputBytes >= pass.policy.weights().localityMinBytes()) {
      for (String object : largestInputs(row)) {
        for (int w : index.holders(object)) {
          if (seen[w] != stamp && index.usable[w] && index.freeCount[w] >= row.gpus
              && poolMatches(row, index.pool[w]) && accepts(row, w, pass) == 0) {
            seen[w] = stamp;
            found = add(found, w);
          }
        }
      }
    }
    int baseline = found;
    scan:
    for (int f = row.gpus; f <= index.maxGpus; f++) {
      for (int p = 0; p < index.poolCount(); p++) {
        if (!poolMatches(row, p)) {
          continue;
        }
        ClusterIndex.IntBag bucket = index.bucket(p, f);
        for (int i = 0; i < bucket.size(); i++) {
          int w = bucket.get(i);
          if (seen[w] == stamp) {
            continue;
          }
          int rejected = accepts(row, w, pass);
          if (rejected == 1) {
            expiryRejects++;
          } else if (rejected > 1) {
            otherRejects++;
          } else {
            found = add(found, w);
            if (found - baseline >= limit) {
              break scan;
            }
          }
        }
      }
    }
    if (found == 0) {
      boolean expiry = expiryRejects > 0 && otherRejects == 0;
      failed.add(new Failed(row.pool, row.gpus, row.cpus, row.memory, row.walltimeMillis, expiry));
      explain(row, pass, expiry);
      return false;
    }
    double best = Double.NEGATIVE_INFINITY;
    for (int i = 0; i < found; i++) {
      int w = candidates[i];
      long gpus = GpuPicker.pick(index.distances[w], index.gpuCount[w], index.freeMask[w],
          row.gpus);
      double score = 0;
      for (WorkerScore s : scores) {
        score += pass.weightOf(s) * s.score(row, w, gpus, pass);
      }
      if (score > best) {
        best = score;
        chosenWorker = w;
        chosenGpus = gpus;
      }
    }
    return true;
  }

  private static boolean poolMatches(CallRow row, int pool) {
    return row.pool == CallRow.ANY_POOL || row.pool == pool;
  }

  /** 0 if every filter accepts; 1 if only the walltime/expiry filter refused; 2 otherwise. */
  private int accepts(CallRow row, int w, Pass pass) {
    for (int i = 0; i < filters.length; i++) {
      if (!filters[i].accepts(row, w, pass)) {
        return filters[i] == WorkerFilter.STAYS_UP ? 1 : 2;
      }
    }
    return 0;
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
  private record Wording(int pool, int gpus, double cpus, long memory, long walltime,
      boolean expiry, int mostFree, String borrowReason) {}

  private final Map<Wording, Verdict> wordings = new java.util.HashMap<>();

  /** Names what is missing, in the caller's words (built once per distinct wording). */
  private void explain(CallRow row, Pass pass, boolean expiry) {
    int mostFree = pass.index.maxFree(row.pool);
    Wording key = new Wording(row.pool, row.gpus, row.cpus, row.memory,
        expiry ? row.walltimeMillis : 0, expiry, mostFree, row.borrowReason);
    Verdict verdict = wordings.get(key);
    if (verdict == null) {
      verdict = wording(row, pass, expiry, mostFree);
      wordings.put(key, verdict);
    }
    row.waitWith(verdict.code, verdict.reason);
  }

  private static Verdict wording(CallRow row, Pass pass, boolean expiry, int mostFree) {
    ClusterIndex index = pass.index;
    String where = row.pool == CallRow.ANY_POOL ? "" : " in pool '" + row.call.pool() + "'";
    WaitCode code;
    String reason;
    if (index.usableWorkers(row.pool) == 0) {
      code = WaitCode.NO_WORKERS;
      reason = index.size == 0 ? "no worker has joined the cluster"
          : row.pool == CallRow.UNKNOWN_POOL ? "no worker has joined pool '" + row.call.pool() + "'"
          : "every worker" + where + " is draining; waiting for a worker to join";
    } else {
      String gpus = Text.count(row.gpus, "GPU");
      if (mostFree < row.gpus) {
        code = WaitCode.CAPACITY;
        reason = "no worker" + where + " has " + gpus + " free (most free on one worker: "
            + mostFree + ")";
      } else if (expiry) {
        code = WaitCode.WORKER_EXPIRY;
        reason = "no worker" + where + (row.gpus > 0 ? " with " + gpus + " free" : "")
            + " stays up for the walltime of "
            + Text.duration(Duration.ofMillis(row.walltimeMillis));
      } else {
        code = WaitCode.CAPACITY;
        reason = "no worker" + where + (row.gpus > 0 ? " with " + gpus + " free" : "") + " has "
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
}
