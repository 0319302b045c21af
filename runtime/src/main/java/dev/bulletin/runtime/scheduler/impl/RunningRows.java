package dev.bulletin.runtime.scheduler.impl;

import dev.bulletin.runtime.scheduler.snapshot.RunningCall;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The snapshot's running calls as one pass reads them: each call's names interned once (8,000
 * running calls on 1,000 workers: three lookups each were a few per cent of a pass), the few
 * that the index and the preemption planner read listed apart, what they add to the counters,
 * and their holdings.
 */
final class RunningRows {
  private final List<RunningCall> running;
  private final int[] user;
  private final int[] group;
  private final int[] qos;
  /** The calls that share a GPU, may be preempted or are being stopped. */
  final List<RunningCall> special = new ArrayList<>();
  /** How many running calls are being stopped for each queued call, by its id. */
  final Map<String, Integer> stoppingFor = new HashMap<>();

  RunningRows(List<RunningCall> running, Names users, Names groups, Names qosNames) {
    this.running = running;
    user = new int[running.size()];
    group = new int[running.size()];
    qos = new int[running.size()];
    for (int i = 0; i < user.length; i++) {
      RunningCall call = running.get(i);
      user[i] = users.id(call.user());
      group[i] = groups.id(call.group());
      qos[i] = qosNames.find(call.qos());
      if (call.preemptible() || call.fractional() || call.beingPreempted()) {
        special.add(call);
      }
      if (call.beingPreempted()) {
        stoppingFor.merge(call.preemptedFor(), 1, Integer::sum);
      }
    }
  }

  /** Adds every call to {@code counters}; @return the GPUs lent (held by preemptible calls). */
  double count(Counters counters) {
    double lent = 0;
    for (int i = 0; i < user.length; i++) {
      RunningCall call = running.get(i);
      double share = call.gpuShare();
      counters.add(user[i], group[i], qos[i], share, call.preemptible());
      if (call.preemptible()) {
        lent += share;
      }
    }
    return lent;
  }

  /**
   * What the running calls hold and until when (the grace for one being stopped), in a list of
   * the caller's. A pass asks once, and only for an estimate or a reservation: a refill pass
   * that explains nothing never does.
   */
  List<Holding> holdings(ClusterIndex index, long nowMillis, long graceMillis) {
    List<Holding> holdings = new ArrayList<>(running.size());
    for (int i = 0; i < user.length; i++) {
      RunningCall call = running.get(i);
      Integer w = index.byId.get(call.workerId());
      long end = call.beingPreempted() ? nowMillis + graceMillis : call.endsBy().toEpochMilli();
      holdings.add(new Holding(w == null ? -1 : w, user[i], group[i], qos[i],
          call.fractional() ? 0 : call.gpus(), call.gpuShare(), call.cpus(),
          call.memoryBytes(), call.preemptible(), end));
    }
    return holdings;
  }
}
