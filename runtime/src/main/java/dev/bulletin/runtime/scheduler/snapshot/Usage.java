package dev.bulletin.runtime.scheduler.snapshot;

import java.time.Instant;
import java.util.Map;

/**
 * What groups and users have used, kept by the runtime's usage ledger.
 *
 * @param groups per group: recent GPU-seconds (decayed, for fair share), GPU-hours this quota
 *     period, credits balance, and when the period ends
 * @param users per user: recent GPU-seconds (decayed, for fair share inside the group)
 */
public record Usage(Map<String, GroupUsage> groups, Map<String, Double> users) {

  public static final Usage NONE = new Usage(Map.of(), Map.of());

  public Usage {
    groups = groups == null ? Map.of() : Map.copyOf(groups);
    users = users == null ? Map.of() : Map.copyOf(users);
  }

  public GroupUsage group(String name) {
    return groups.getOrDefault(name, GroupUsage.NONE);
  }

  public double userRecentGpuSeconds(String user) {
    return users.getOrDefault(user, 0.0);
  }

  public record GroupUsage(
      double recentGpuSeconds, double gpuHoursThisPeriod, double credits, Instant periodEndsAt) {
    public static final GroupUsage NONE = new GroupUsage(0, 0, 0, Instant.MAX);

    public GroupUsage {
      if (!(credits >= 0)) {
        throw new IllegalArgumentException("credits must be >= 0, got " + credits);
      }
      periodEndsAt = periodEndsAt == null ? Instant.MAX : periodEndsAt;
    }
  }
}
