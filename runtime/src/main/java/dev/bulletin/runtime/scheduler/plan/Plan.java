package dev.bulletin.runtime.scheduler.plan;

import java.util.List;
import java.util.Optional;

/**
 * The answer of one pass. The runtime applies it in this order: reserve and start the
 * placements, signal the preemptions' victims, fail the infeasible calls, and publish each
 * waiting call's {@link WaitInfo}.
 *
 * @param waiting every call left waiting ("not now"), in position order
 * @param infeasible calls that can never run as asked ("never")
 * @param revisitAt when a pass would say something this one could not, with nothing else
 *     changing: a waiting call old enough to be explained, a reclaim whose patience ran out; the
 *     runtime runs a pass then (its periodic timer is too slow for either)
 */
public record Plan(
    List<Placement> placements,
    List<Preemption> preemptions,
    List<Waiting> waiting,
    List<Rejection> infeasible,
    PassStats stats,
    Optional<java.time.Instant> revisitAt) {

  public Plan {
    placements = List.copyOf(placements);
    preemptions = List.copyOf(preemptions);
    waiting = List.copyOf(waiting);
    infeasible = List.copyOf(infeasible);
  }

  public Plan(List<Placement> placements, List<Preemption> preemptions, List<Waiting> waiting,
      List<Rejection> infeasible, PassStats stats) {
    this(placements, preemptions, waiting, infeasible, stats, Optional.empty());
  }

  public Optional<Placement> placement(String callId) {
    return placements.stream().filter(p -> p.callId().equals(callId)).findFirst();
  }

  /** A waiting call and what its owner is told. */
  public record Waiting(String callId, WaitInfo info) {}

  /** One call's wait (a scan: the runtime walks {@link #waiting} in order instead). */
  public Optional<WaitInfo> waitInfo(String callId) {
    return waiting.stream().filter(w -> w.callId().equals(callId)).map(Waiting::info).findFirst();
  }

  public Optional<Rejection> rejection(String callId) {
    return infeasible.stream().filter(r -> r.callId().equals(callId)).findFirst();
  }
}
