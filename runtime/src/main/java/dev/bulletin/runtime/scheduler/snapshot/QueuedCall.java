package dev.bulletin.runtime.scheduler.snapshot;

import dev.bulletin.runtime.scheduler.Demand;
import java.time.Duration;
import java.time.Instant;
import java.util.Map;

/**
 * A call waiting to be placed.
 *
 * @param qos its QoS class; "" means the policy's default class
 * @param pool the pool it must run in; "" means any
 * @param priority orders this user's own calls (higher first); it never moves a call ahead of
 *     other users' calls, credits do that
 * @param creditsSpent credits the user offers to raise this call's priority (an urgent run);
 *     charged to the group's balance when the call is placed
 * @param inputs argument objects it reads, id to size in bytes (data locality)
 * @param walltime how long it may run; {@link Duration#ZERO} means its QoS's maximum
 */
public record QueuedCall(
    String id,
    String user,
    String group,
    String qos,
    Demand demand,
    String pool,
    int priority,
    long creditsSpent,
    Map<String, Long> inputs,
    Instant submittedAt,
    Duration walltime) {

  public QueuedCall {
    if (id == null || id.isBlank()) {
      throw new IllegalArgumentException("queued call id is required");
    }
    if (user == null || group == null || demand == null || submittedAt == null) {
      throw new IllegalArgumentException("queued call " + id
          + ": user, group, demand and submittedAt are required");
    }
    qos = qos == null ? "" : qos;
    pool = pool == null ? "" : pool;
    if (creditsSpent < 0) {
      throw new IllegalArgumentException("queued call " + id + ": creditsSpent must be >= 0, got "
          + creditsSpent);
    }
    inputs = inputs == null ? Map.of() : Map.copyOf(inputs);
    walltime = walltime == null ? Duration.ZERO : walltime;
    if (walltime.isNegative()) {
      throw new IllegalArgumentException("queued call " + id + ": walltime must be >= 0");
    }
  }
}
