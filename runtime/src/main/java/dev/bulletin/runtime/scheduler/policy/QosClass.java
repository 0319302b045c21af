package dev.bulletin.runtime.scheduler.policy;

import java.time.Duration;

/**
 * A QoS class: how urgent its calls are and what they may hold.
 *
 * @param priority higher runs first; orders the queue before anything else
 * @param maxWalltime a call asking for more is refused; a call asking for nothing gets this
 * @param maxCallsPerUser concurrent calls one user may run in this class
 * @param preemptible its calls may be stopped (and requeued) for entitled work; they run on idle
 *     capacity and do not count against group quotas
 */
public record QosClass(
    String name, int priority, Duration maxWalltime, int maxCallsPerUser, boolean preemptible) {

  public static final int UNLIMITED = Integer.MAX_VALUE;

  public QosClass {
    if (name == null || name.isBlank()) {
      throw new IllegalArgumentException("qos name is required");
    }
    if (maxWalltime == null || maxWalltime.isNegative() || maxWalltime.isZero()) {
      throw new IllegalArgumentException("qos." + name + ".max_walltime must be > 0");
    }
    if (maxCallsPerUser < 1) {
      throw new IllegalArgumentException("qos." + name + ".max_calls_per_user must be >= 1 or"
          + " unlimited, got " + maxCallsPerUser);
    }
  }

  public static QosClass interactive() {
    return new QosClass("interactive", 100, Duration.ofHours(2), 4, false);
  }

  public static QosClass batch() {
    return new QosClass("batch", 50, Duration.ofDays(7), UNLIMITED, false);
  }

  public static QosClass scavenger() {
    return new QosClass("scavenger", 0, Duration.ofDays(7), UNLIMITED, true);
  }
}
