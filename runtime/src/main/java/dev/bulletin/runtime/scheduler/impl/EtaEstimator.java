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
 * pass, after the placements, and answers are cached per shape.
 */
final class EtaEstimator {
  private final PassView pass;
  private final List<List<Holding>> byWorker = new ArrayList<>();
  private final Map<Integer, List<Holding>> byGroup = new HashMap<>();
  private final Map<Integer, List<Holding>> byUser = new HashMap<>();
  private final Map<Shape, Optional<Instant>> capacityCache = new HashMap<>();

  private record Shape(int gpus, double cpus, long memory) {}

  EtaEstimator(PassView pass, List<Holding> holdings) {
    this.pass = pass;
    for (int w = 0; w < pass.index().size; w++) {
      byWorker.add(new ArrayList<>());
    }
    Comparator<Holding> byEnd = Comparator.comparingLong(Holding::endMillis);
    for (Holding h : holdings) {
      if (h.worker() >= 0) {
        byWorker.get(h.worker()).add(h);
      }
      if (!h.preemptible()) {
        byGroup.computeIfAbsent(h.group(), k -> new ArrayList<>()).add(h);
      }
      byUser.computeIfAbsent(h.user(), k -> new ArrayList<>()).add(h);
    }
    byWorker.forEach(list -> list.sort(byEnd));
    byGroup.values().forEach(list -> list.sort(byEnd));
    byUser.values().forEach(list -> list.sort(byEnd));
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
      for (Holding h : byWorker.get(w)) {
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
    for (Holding h : byGroup.getOrDefault(row.group, List.of())) {
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
    for (Holding h : byUser.getOrDefault(row.user, List.of())) {
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
    for (Holding h : byUser.getOrDefault(row.user, List.of())) {
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
