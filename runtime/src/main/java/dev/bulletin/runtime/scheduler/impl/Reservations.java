package dev.bulletin.runtime.scheduler.impl;

import dev.bulletin.runtime.scheduler.policy.Backfill;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * The pass's backfill reservations (EASY backfill, per worker): the oldest big calls that have
 * waited {@link Backfill#after} each get GPUs on the worker where enough free soonest, judged by
 * the walltimes of what holds them; preemptible work counts as freeing its GPUs within the
 * preemption grace, since the reserved call (entitled) may reclaim it. From then on, in this
 * pass, a call may use that worker only if it ends before the reservation starts (by its
 * walltime), or if it takes no more than the GPUs the reserved call will leave over at that
 * time. The scheduler keeps no state between passes: each pass reserves again from the
 * snapshot, so the reservation follows the cluster (a call ending early brings it forward) and
 * is gone once the reserved call is placed.
 */
final class Reservations {

  /** A reservation: worker {@code w} from {@code startMillis} for {@code row}. */
  static final class Reservation {
    final CallRow row;
    final int worker;
    final long startMillis;
    /** GPUs free at the start beyond what the reserved call needs: longer calls may take these. */
    int spare;
    /** Of the GPUs the reserved call counts on, those preemptible work holds (to reclaim). */
    final int reclaimable;

    Reservation(CallRow row, int worker, long startMillis, int spare, int reclaimable) {
      this.row = row;
      this.worker = worker;
      this.startMillis = startMillis;
      this.spare = spare;
      this.reclaimable = reclaimable;
    }
  }

  private final Reservation[] byWorker;
  private final List<Reservation> all = new ArrayList<>();

  Reservations(int workers) {
    byWorker = new Reservation[workers];
  }

  /**
   * The calls that get a reservation this pass, oldest first: big enough, waited long enough,
   * in a class that is not preemptible (preemptible work borrows idle GPUs, it is not owed any).
   */
  static List<CallRow> candidates(CallRow[] rows, Backfill backfill, int largestWorker,
      long nowMillis) {
    List<CallRow> found = new ArrayList<>();
    for (CallRow row : rows) {
      if (row.qos != null && !row.qos.preemptible()
          && backfill.reserves(row.gpus, nowMillis - row.submittedMillis, largestWorker)) {
        found.add(row);
      }
    }
    found.sort((a, b) -> a.submittedMillis != b.submittedMillis
        ? Long.compare(a.submittedMillis, b.submittedMillis) : Integer.compare(a.index, b.index));
    return found.size() > backfill.maxReservations()
        ? found.subList(0, backfill.maxReservations()) : found;
  }

  /**
   * Reserves for {@code row} the worker, not yet reserved, where its GPUs free soonest; null if
   * no worker could ever hold it or every such worker is reserved. A holder frees its GPUs when
   * its walltime ends, or, if it is preemptible, by {@code reclaimedByMillis} (the pass may
   * preempt for the reserved call: now plus the grace; {@link Long#MAX_VALUE} when preemption
   * is off), whichever is first.
   */
  Reservation reserve(CallRow row, ClusterIndex index, List<Holding> holdings, long nowMillis,
      long reclaimedByMillis) {
    int bestWorker = -1;
    long bestStart = Long.MAX_VALUE;
    int bestSpare = 0;
    int bestReclaimable = 0;
    List<List<Holding>> perWorker = byWorkerHoldings(index, holdings);
    for (int w = 0; w < index.size; w++) {
      if (!index.usable[w] || byWorker[w] != null || index.gpuCount[w] < row.gpus
          || index.workers[w].cpus() < row.cpus || index.workers[w].memoryBytes() < row.memory
          || (index.expiresMillis[w] != Long.MAX_VALUE
              && index.expiresMillis[w] < nowMillis + row.walltimeMillis)) {
        continue;
      }
      int free = index.freeCount[w];
      int reclaimable = 0;
      long start = nowMillis;
      List<Holding> held = perWorker.get(w);
      held.sort((a, b) -> Long.compare(freesAt(a, reclaimedByMillis),
          freesAt(b, reclaimedByMillis)));
      for (int i = 0; i < held.size() && free < row.gpus; i++) {
        Holding holding = held.get(i);
        long frees = freesAt(holding, reclaimedByMillis);
        free += holding.gpus();
        start = Math.max(start, frees);
        if (frees < holding.endMillis()) {
          reclaimable += holding.gpus();
        }
      }
      if (free >= row.gpus && start < bestStart) {
        bestWorker = w;
        bestStart = start;
        bestSpare = free - row.gpus;
        bestReclaimable = reclaimable;
      }
    }
    if (bestWorker < 0) {
      return null;
    }
    Reservation reservation = new Reservation(row, bestWorker, bestStart, bestSpare,
        bestReclaimable);
    byWorker[bestWorker] = reservation;
    all.add(reservation);
    row.reservedFrom = java.time.Instant.ofEpochMilli(bestStart);
    row.reservedWorker = index.workers[bestWorker].id();
    return reservation;
  }

  /** When a holder gives its GPUs back at the latest: its walltime, or its reclaim if sooner. */
  private static long freesAt(Holding holding, long reclaimedByMillis) {
    return holding.preemptible() ? Math.min(holding.endMillis(), reclaimedByMillis)
        : holding.endMillis();
  }

  private static List<List<Holding>> byWorkerHoldings(ClusterIndex index,
      List<Holding> holdings) {
    List<List<Holding>> perWorker = new ArrayList<>(index.size);
    for (int w = 0; w < index.size; w++) {
      perWorker.add(new ArrayList<>());
    }
    for (Holding holding : holdings) {
      if (holding.worker() >= 0 && holding.gpus() > 0) {
        perWorker.get(holding.worker()).add(holding);
      }
    }
    return perWorker;
  }

  boolean any() {
    return !all.isEmpty();
  }

  /**
   * Whether {@code row} may use worker {@code w} now: it is not reserved, or the call is the one
   * it is reserved for, or it ends before the reservation starts, or it fits in the spare GPUs.
   */
  boolean admits(CallRow row, int w, long nowMillis) {
    Reservation reservation = byWorker[w];
    return reservation == null || reservation.row == row || row.gpus == 0
        || nowMillis + row.walltimeMillis <= reservation.startMillis
        || row.gpus <= reservation.spare;
  }

  /** A call placed on worker {@code w} that runs past the reservation takes from its spare. */
  void placed(CallRow row, int w, long nowMillis) {
    Reservation reservation = byWorker[w];
    if (reservation != null && reservation.row != row
        && nowMillis + row.walltimeMillis > reservation.startMillis) {
      reservation.spare -= row.gpus;
    }
  }

  /** The reservation holding worker {@code w}, or null. */
  Reservation on(int w) {
    return byWorker[w];
  }

  int count() {
    return all.size();
  }

  /** The fewest GPUs a call holding a reservation asks (how a wait names them). */
  int minGpus() {
    return all.stream().mapToInt(r -> r.row.gpus).min().orElse(0);
  }

  @Override
  public String toString() {
    return Arrays.toString(all.stream().map(r -> r.row.id() + "@" + r.worker).toArray());
  }
}
