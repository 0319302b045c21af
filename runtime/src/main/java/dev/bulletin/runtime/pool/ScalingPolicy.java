package dev.bulletin.runtime.pool;

import dev.bulletin.protocol.Text;
import dev.bulletin.runtime.pool.ScalingDecision.Launch;
import dev.bulletin.runtime.pool.ScalingDecision.Replace;
import dev.bulletin.runtime.pool.ScalingDecision.Terminate;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;

/**
 * When a pool grows and shrinks. Pure: no I/O, no threads, time from the injected clock; it only
 * remembers launch failures for its backoff. Not thread-safe: one owner calls it.
 *
 * <p>Rules, in the order they apply:
 * <ol>
 *   <li>A worker about to expire (within {@code replace_before_expiry} of its walltime) is
 *       stopped when idle, drained when busy ({@link Replace}); a drained worker with no running
 *       call is stopped. Either way it no longer counts as capacity, so the sizing below launches
 *       its successor when the pool still needs one.
 *   <li>A worker that has not registered within {@code start_timeout} is stopped and counts as a
 *       failed launch.
 *   <li>Wanted workers = max(min_workers, busy + workers the pending calls need + warm_workers);
 *       starting and idle workers count as available. Launches fill the gap, capped so that every
 *       allocation held (draining and starting included) stays within max_workers, and paused while
 *       backing off after failed launches (initial delay doubling up to the maximum).
 *   <li>Above the wanted number, workers idle for {@code idle_timeout} are stopped, those closest to
 *       expiry first, then the longest idle.
 * </ol>
 */
public final class ScalingPolicy {

  private final PoolConfig pool;
  private final Clock clock;
  private final ScalingMetrics metrics;
  private int failuresInARow;
  private Instant retryAt = Instant.MIN;

  public ScalingPolicy(PoolConfig pool, Clock clock, ScalingMetrics metrics) {
    this.pool = pool;
    this.clock = clock;
    this.metrics = metrics;
  }

  public PoolConfig pool() {
    return pool;
  }

  /** When launches resume after failures; empty when not backing off. */
  public Optional<Instant> backoffUntil() {
    return clock.instant().isBefore(retryAt) ? Optional.of(retryAt) : Optional.empty();
  }

  /** A launch failed (provider refused, the worker died or never registered): back off. */
  public BackoffEvent launchFailed(String message) {
    failuresInARow++;
    Duration delay = pool.backoffInitial();
    for (int i = 1; i < failuresInARow && delay.compareTo(pool.backoffMax()) < 0; i++) {
      delay = delay.multipliedBy(2);
    }
    if (delay.compareTo(pool.backoffMax()) > 0) {
      delay = pool.backoffMax();
    }
    retryAt = clock.instant().plus(delay);
    metrics.count(pool.name(), "backoff", 1);
    return new BackoffEvent(pool.name(), failuresInARow, delay, retryAt, message);
  }

  /** A launched worker registered: the provider works, the backoff resets. */
  public void launchSucceeded() {
    failuresInARow = 0;
    retryAt = Instant.MIN;
  }

  public List<ScalingDecision> decide(PoolSnapshot snapshot) {
    Instant now = clock.instant();
    List<ScalingDecision> decisions = new ArrayList<>();
    int busy = 0;
    int starting = snapshot.launchesInFlight();
    int held = snapshot.launchesInFlight();
    List<PoolWorker> idle = new ArrayList<>();
    List<Terminate> startTimeouts = new ArrayList<>();

    for (PoolWorker w : snapshot.workers()) {
      Optional<Duration> left = w.expiresAt().map(at -> Duration.between(now, at));
      boolean expiring = left.isPresent() && left.get().compareTo(pool.replaceBeforeExpiry()) <= 0;
      if (w.state() == WorkerState.DRAINING) {
        if (w.runningCalls() == 0) {
          decisions.add(new Terminate(w.workerId(), "drained: its running calls have ended"));
        } else {
          held++;
        }
      } else if (w.state() == WorkerState.STARTING && !pool.startTimeout().isZero()
          && !now.isBefore(w.since().plus(pool.startTimeout()))) {
        startTimeouts.add(new Terminate(w.workerId(), "did not register within start_timeout "
            + Text.duration(pool.startTimeout()) + "; counted as a failed launch"));
      } else if (expiring && w.state() == WorkerState.BUSY) {
        decisions.add(new Replace(w.workerId(), w.expiresAt().get(), "allocation ends in "
            + Text.duration(left.get()) + " (replace_before_expiry "
            + Text.duration(pool.replaceBeforeExpiry()) + "): drained, it takes no new call;"
            + " stopped when its " + Text.count(w.runningCalls(), "running call") + " end"));
        held++;
      } else if (expiring) {
        decisions.add(new Terminate(w.workerId(), "allocation ends in "
            + Text.duration(left.get()) + " (replace_before_expiry "
            + Text.duration(pool.replaceBeforeExpiry()) + ") and it runs no call: stopped"
            + " ahead of its walltime"));
      } else {
        held++;
        switch (w.state()) {
          case BUSY -> busy++;
          case IDLE -> idle.add(w);
          default -> starting++;
        }
      }
    }
    decisions.addAll(startTimeouts);
    for (Terminate timeout : startTimeouts) {
      launchFailed("worker " + timeout.workerId() + " " + timeout.reason());
    }

    Need need = need(snapshot.pending());
    int wanted = Math.max(pool.minWorkers(), busy + need.workers + pool.warmWorkers());
    int available = idle.size() + starting;
    int current = busy + available;

    if (wanted > current) {
      int room = pool.maxWorkers() - held;
      int count = Math.min(wanted - current, room);
      if (count > 0 && !backoffUntil().isPresent()) {
        decisions.add(new Launch(count, launchReason(need, busy, available, wanted, count,
            wanted - current > room)));
      }
    } else if (wanted < current) {
      List<PoolWorker> idleLongEnough = idle.stream()
          .filter(w -> !now.isBefore(w.since().plus(pool.idleTimeout())))
          .sorted(Comparator.<PoolWorker, Instant>comparing(w -> w.expiresAt().orElse(Instant.MAX))
              .thenComparing(PoolWorker::since))
          .limit(current - wanted)
          .toList();
      for (PoolWorker w : idleLongEnough) {
        decisions.add(new Terminate(w.workerId(), "idle for "
            + Text.duration(Duration.between(w.since(), now)) + " (idle_timeout "
            + Text.duration(pool.idleTimeout()) + "); the pool wants " + Text.count(wanted, "worker")
            + " (min_workers " + pool.minWorkers() + ", warm_workers "
            + pool.warmWorkers() + ", " + busy + " busy)"));
      }
    }
    for (ScalingDecision d : decisions) {
      metrics.count(pool.name(), d.kind(), d instanceof Launch launch ? launch.count() : 1);
    }
    return decisions;
  }

  /** Workers the pending calls need, by the scarcest resource of each call on this shape. */
  private Need need(List<PendingDemand> pending) {
    double units = 0;
    int calls = 0;
    for (PendingDemand demand : pending) {
      if (demand.count() > 0 && pool.worker().fits(demand)) {
        units += demand.count() * pool.worker().share(demand);
        calls += demand.count();
      }
    }
    return new Need(calls, (int) Math.ceil(units - 1e-9));
  }

  private record Need(int calls, int workers) {}

  private String launchReason(Need need, int busy, int available, int wanted, int count, boolean capped) {
    List<String> why = new ArrayList<>();
    if (need.calls > 0) {
      why.add(Text.count(need.calls, "waiting call") + " need " + Text.count(need.workers, "worker")
          + " of " + pool.worker());
    }
    if (pool.warmWorkers() > 0) {
      why.add("warm_workers " + pool.warmWorkers());
    }
    if (wanted == pool.minWorkers()) {
      why.add("min_workers " + pool.minWorkers());
    }
    return "launch " + count + ": " + String.join(", ", why) + "; " + busy + " busy, " + available
        + " idle or starting" + (capped ? "; capped by max_workers " + pool.maxWorkers() : "");
  }
}
