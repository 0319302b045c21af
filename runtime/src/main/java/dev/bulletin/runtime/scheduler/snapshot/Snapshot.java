package dev.bulletin.runtime.scheduler.snapshot;

import dev.bulletin.runtime.scheduler.policy.PolicyConfig;
import java.util.List;

/**
 * Everything one scheduling pass reads, immutable: the runtime builds it from its own state on
 * every change that could place work and on a timer, and applies the returned plan.
 *
 * @param explainWaiting whether the plan explains the calls that wait (position, reason,
 *     estimate, suggestions). A caller that will tell no one (the runtime's refill pass over
 *     the few users who may start a call: its positions are not the queue's) leaves it off, and
 *     the pass skips the estimates, which read every running call; the moment a later pass
 *     should come ({@code Plan#revisitAt}) is planned either way.
 */
public record Snapshot(
    List<WorkerState> workers,
    List<RunningCall> running,
    List<QueuedCall> queue,
    Usage usage,
    PolicyConfig policy,
    boolean explainWaiting) {

  /** A snapshot whose plan explains the calls that wait. */
  public Snapshot(List<WorkerState> workers, List<RunningCall> running, List<QueuedCall> queue,
      Usage usage, PolicyConfig policy) {
    this(workers, running, queue, usage, policy, true);
  }

  public Snapshot {
    workers = List.copyOf(workers);
    running = List.copyOf(running);
    queue = List.copyOf(queue);
    usage = usage == null ? Usage.NONE : usage;
    policy = policy == null ? PolicyConfig.defaults() : policy;
  }
}
