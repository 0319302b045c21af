package dev.bulletin.runtime.scheduler.impl;

import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * Estimates when a waiting call could start, from when held resources come back at the latest
 * (start + walltime). Calls ahead in the queue are not simulated, and calls that end before
 * their walltime make it sooner: it is an estimate, shown with the position. Built once per
 * pass, after the placements, and answers are cached per shape; its indexes on first use.
 */
final class EtaEstimator {
  private static final Comparator<Holding> BY_END = Comparator.comparingLong(Holding::endMillis);
  private final PassView pass;
  private final List<Holding> holdings;
  /**
   * The holdings by worker, group and user, each sorted by end: built at the first question
   * that needs them, since most passes ask only one kind (a user at their QoS cap asks no
   * worker's), and a list per worker for 1,000 workers was 14 % of the loop's time in every
   * pass (make bench-scale) when no waiting call asked it.
   */
  private Map<Integer, List<Holding>> byWorker;
  private Map<Integer, List<Holding>> byGroup;
  private Map<Integer, List<Holding>> byUser;
  private final Map<Shape, Optional<Instant>> capacityCache = new HashMap<>();

  private record Shape(int gpus, double cpus, long memory) {}

  EtaEstimator(PassView pass, List<Holding> holdings) {
    this.pass = pass;
    this.holdings = holdings;
  }

  /** The holdings that {@code key} gives a key (skipped where it gives null), sorted by end. */
  private Map<Integer, List<Holding>> sorted(java.util.function.Function<Holding, Integer> key) {
    Map<Integer, List<Holding>> by = new HashMap<>();
    for (Holding h : holdings) {
      Integer k = key.apply(h);
      if (k != null) {
        by.computeIfAbsent(k, ignored -> new ArrayList<>()).add(h);
      }
    }
    by.values().forEach(list -> list.sort(BY_END));
    return by;
  }

  private List<Holding> onWorker(int worker) {
    if (byWorker == null) {
      byWorker = sorted(h -> h.worker() >= 0 ? h.worker() : null);
    }
    return byWorker.getOrDefault(worker, List.of());
  }

  private List<Holding> ofGroup(int group) {
    if (byGroup == null) {
      byGroup = sorted(h -> h.preemptible() ? null : h.group());
    }
    return byGroup.getOrDefault(group, List.of());
  }

  private List<Holding> ofUser(int user) {
    if (byUser == null) {
      byUser = sorted(Holding::user);
    }
    return byUser.getOrDefault(user, List.of());
  }

  private Optional<Instant> at(long millis) {
    return Optional.of(Instant.ofEpochMilli(Math.max(millis, pass.nowMillis())));
  }

  /** When some worker has the call's GPUs, CPUs and memory back. */
  Optional<Instant> capacity(CallRow row) {
    Shape key = new Shape(row.gpus, row.cpus, row.memory);
    Optional<Instant> cached = capacityCache.get(key);
    if (cached == null) {
      cached = computeCapacity(row);
      capacityCache.put(key, cached);
    }
    return cached;
  }

  private Optional<Instant> computeCapacity(CallRow row) {
    ClusterIndex index = pass.index();
    long best = Long.MAX_VALUE;
    for (int w = 0; w < index.size; w++) {
      if (!index.usable[w] || index.gpuCount[w] < row.gpus
          || index.workers[w].cpus() < row.cpus || index.workers[w].memoryBytes() < row.memory) {
        continue;
      }
      int gpus = index.freeCount[w];
      double cpus = index.freeCpus[w];
      long memory = index.freeMemory[w];
      long when = pass.nowMillis();
      for (Holding h : onWorker(w)) {
        if (gpus >= row.gpus && cpus >= row.cpus - 1e-9 && memory >= row.memory) {
          break;
        }
        gpus += h.gpus();
        cpus += h.cpus();
        memory += h.memory();
        when = h.endMillis();
      }
      if (gpus >= row.gpus && cpus >= row.cpus - 1e-9 && memory >= row.memory) {
        best = Math.min(best, when);
      }
    }
    return best == Long.MAX_VALUE ? Optional.empty() : at(best);
  }

  /** When the group's in-quota GPUs drop low enough for this call. */
  Optional<Instant> groupQuota(CallRow row) {
    double held = pass.counters().groupQuotaGpus(row.group);
    double allowed = row.quota.maxGpus() - row.share;
    for (Holding h : ofGroup(row.group)) {
      if (held <= allowed) {
        break;
      }
      held -= h.share();
      if (held <= allowed) {
        return at(h.endMillis());
      }
    }
    return held <= allowed ? at(pass.nowMillis()) : Optional.empty();
  }

  /** When one of the user's calls in the call's QoS ends (freeing a concurrency slot). */
  Optional<Instant> qosSlot(CallRow row) {
    int over = pass.counters().userQosCalls(row.user, row.qosId) - row.qos.maxCallsPerUser();
    int seen = 0;
    for (Holding h : ofUser(row.user)) {
      if (h.qos() == row.qosId && seen++ >= over) {
        return at(h.endMillis());
      }
    }
    return Optional.empty();
  }

  /** When the user's own calls give back enough GPUs (or one call slot) for the limit. */
  Optional<Instant> userLimit(CallRow row) {
    double gpus = pass.counters().userGpus(row.user);
    int calls = pass.counters().userCalls(row.user);
    for (Holding h : ofUser(row.user)) {
      if (gpus + row.share <= row.limit.maxGpus() && calls < row.limit.maxCalls()) {
        break;
      }
      gpus -= h.share();
      calls--;
      if (gpus + row.share <= row.limit.maxGpus() && calls < row.limit.maxCalls()) {
        return at(h.endMillis());
      }
    }
    return Optional.empty();
  }
}
