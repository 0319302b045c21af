package dev.bulletin.runtime.scheduler.policy;

import dev.bulletin.protocol.Quantities;
import java.time.Duration;
import java.util.Set;

/**
 * A per-user limit profile (e.g. a tighter one for interns), on top of QoS and group rules.
 *
 * @param maxGpus GPUs the user's calls may hold at once; a call asking more is refused
 * @param maxCalls calls the user may run at once
 * @param maxWalltime longest walltime one call may ask for
 * @param users who it applies to; the profile named {@code default} applies to everyone else
 */
public record UserLimit(
    String name, int maxGpus, int maxCalls, Duration maxWalltime, Set<String> users) {

  public static final int UNLIMITED = Integer.MAX_VALUE;
  public static final String DEFAULT = "default";

  public UserLimit {
    if (name == null || name.isBlank()) {
      throw new IllegalArgumentException("limit profile name is required");
    }
    if (maxGpus < 0) {
      throw new IllegalArgumentException("limits." + name + ".gpus must be >= 0, got " + maxGpus);
    }
    if (maxCalls < 1) {
      throw new IllegalArgumentException("limits." + name + ".calls must be >= 1, got "
          + maxCalls);
    }
    if (maxWalltime == null || maxWalltime.isZero() || maxWalltime.isNegative()) {
      throw new IllegalArgumentException("limits." + name + ".max_walltime must be > 0");
    }
    users = users == null ? Set.of() : Set.copyOf(users);
  }

  public static UserLimit none() {
    return new UserLimit(DEFAULT, UNLIMITED, UNLIMITED, Quantities.UNLIMITED, Set.of());
  }
}
