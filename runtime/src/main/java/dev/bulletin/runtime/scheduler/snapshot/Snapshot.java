package dev.bulletin.runtime.scheduler.snapshot;

import dev.bulletin.runtime.scheduler.policy.PolicyConfig;
import java.util.List;

/**
 * Everything one scheduling pass reads, immutable: the runtime builds it from its own state on
 * every change that could place work and on a timer, and applies the returned plan.
 */
public record Snapshot(
    List<WorkerState> workers,
    List<RunningCall> running,
    List<QueuedCall> queue,
    Usage usage,
    PolicyConfig policy) {

  public Snapshot {
    workers = List.copyOf(workers);
    running = List.copyOf(running);
    queue = List.copyOf(queue);
    usage = usage == null ? Usage.NONE : usage;
    policy = policy == null ? PolicyConfig.defaults() : policy;
  }
}
