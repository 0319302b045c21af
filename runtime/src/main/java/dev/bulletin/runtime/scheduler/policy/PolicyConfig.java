package dev.bulletin.runtime.scheduler.policy;

import java.time.Duration;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * The sharing policy: QoS classes, group quotas, per-user limits, credits and scoring. Built from
 * the runtime's YAML by {@link PolicyYaml}; {@link #defaults()} needs no file.
 *
 * @param fairShareHorizon a GPU a user holds now counts as this many GPU-seconds of recent
 *     usage when the queue is ordered, so one pass interleaves users instead of serving one
 *     user's whole burst first
 * @param preemptionGrace how long a victim gets between the signal and the kill (its
 *     checkpoint hook runs then); the runtime enforces it, the scheduler uses it for estimates
 * @param reclaimPatience an entitled call preempts once the GPU-seconds it has waited reach
 *     this fraction of the GPU-seconds the preemption would lose: a victim that just started or
 *     checkpointed is stopped at once, one with an hour unsaved only after the call waited 6
 *     minutes (at 0.1), and a GPU that frees meanwhile spares the victim. 0 preempts at once.
 * @param candidateLimit workers scored per call, best-fit first (like Nomad's limit iterator):
 *     bounds a decision's cost on a large cluster
 * @param maxPreemptorsPerPass calls that may plan preemptions in one pass (bounds churn)
 * @param backfill reservations for big calls that waited too long
 */
public record PolicyConfig(
    Map<String, QosClass> qos,
    String defaultQos,
    Map<String, GroupQuota> groups,
    List<UserLimit> limits,
    UserLimit defaultLimit,
    CreditRule credits,
    Weights weights,
    Duration fairShareHorizon,
    Duration preemptionGrace,
    double reclaimPatience,
    int candidateLimit,
    int maxPreemptorsPerPass,
    Backfill backfill) {

  public PolicyConfig {
    qos = byPriority(Map.copyOf(qos));
    if (qos.isEmpty()) {
      throw new IllegalArgumentException("qos: at least one class is required");
    }
    if (!qos.containsKey(defaultQos)) {
      throw new IllegalArgumentException("scheduler.default_qos: '" + defaultQos
          + "' is not a qos class (known: " + String.join(", ", qosNames(qos)) + ")");
    }
    groups = Map.copyOf(groups);
    limits = List.copyOf(limits);
    Map<String, String> seen = new HashMap<>();
    for (UserLimit limit : limits) {
      for (String user : limit.users()) {
        String other = seen.put(user, limit.name());
        if (other != null) {
          throw new IllegalArgumentException("limits: user '" + user + "' is in both '" + other
              + "' and '" + limit.name() + "'; put each user in one profile");
        }
      }
    }
    if (defaultLimit == null || credits == null || weights == null || backfill == null) {
      throw new IllegalArgumentException("defaultLimit, credits, weights and backfill are required");
    }
    if (fairShareHorizon == null || fairShareHorizon.isNegative()) {
      throw new IllegalArgumentException("scheduler.fair_share_horizon must be >= 0");
    }
    if (preemptionGrace == null || preemptionGrace.isNegative()) {
      throw new IllegalArgumentException("scheduler.preemption_grace must be >= 0");
    }
    if (!(reclaimPatience >= 0) || Double.isInfinite(reclaimPatience)) {
      throw new IllegalArgumentException("scheduler.reclaim_patience must be >= 0, got "
          + reclaimPatience);
    }
    if (candidateLimit < 1) {
      throw new IllegalArgumentException("scheduler.candidates must be >= 1, got "
          + candidateLimit);
    }
    if (maxPreemptorsPerPass < 0) {
      throw new IllegalArgumentException("scheduler.max_preemptors_per_pass must be >= 0, got "
          + maxPreemptorsPerPass);
    }
  }

  /** Interactive, batch and scavenger classes; no quotas; no per-user limits. */
  public static PolicyConfig defaults() {
    return new PolicyConfig(defaultQosClasses(), "interactive", Map.of(), List.of(),
        UserLimit.none(), CreditRule.defaults(), Weights.defaults(), Duration.ofHours(1),
        Duration.ofSeconds(30), 0.1, 8, 64, Backfill.defaults());
  }

  /** The same policy with other backfill settings. */
  public PolicyConfig withBackfill(Backfill other) {
    return new PolicyConfig(qos, defaultQos, groups, limits, defaultLimit, credits, weights,
        fairShareHorizon, preemptionGrace, reclaimPatience, candidateLimit, maxPreemptorsPerPass,
        other);
  }

  public static Map<String, QosClass> defaultQosClasses() {
    Map<String, QosClass> classes = new LinkedHashMap<>();
    for (QosClass qos : List.of(QosClass.interactive(), QosClass.batch(), QosClass.scavenger())) {
      classes.put(qos.name(), qos);
    }
    return classes;
  }

  /**
   * The class a call runs in: the one it names, else ({@code null} or blank) the default; empty
   * when it names a class this policy does not have. The one place a call's QoS is resolved.
   */
  public Optional<QosClass> qosFor(String requested) {
    return Optional.ofNullable(qos.get(requested == null || requested.isBlank() ? defaultQos
        : requested));
  }

  /** The group's quota, or no quota for a group the config does not name. */
  public GroupQuota group(String name) {
    GroupQuota quota = groups.get(name);
    return quota != null ? quota : GroupQuota.unlimited(name);
  }

  /** The user's limit profile, else the default one. */
  public UserLimit limitFor(String user) {
    for (UserLimit limit : limits) {
      if (limit.users().contains(user)) {
        return limit;
      }
    }
    return defaultLimit;
  }

  /** Names sorted by priority, highest first: how error messages and suggestions list them. */
  public List<String> qosNames() {
    return List.copyOf(qos.keySet());
  }

  /**
   * The classes in the order {@link #qosNames} lists them: a wait explanation walks them for
   * each call that waits at its class's cap (500,000 of them in make bench-scale's full passes),
   * and sorted them each time.
   */
  private static Map<String, QosClass> byPriority(Map<String, QosClass> qos) {
    Map<String, QosClass> ordered = new java.util.LinkedHashMap<>();
    for (String name : qosNames(qos)) {
      ordered.put(name, qos.get(name));
    }
    return java.util.Collections.unmodifiableMap(ordered);
  }

  private static List<String> qosNames(Map<String, QosClass> qos) {
    return qos.values().stream()
        .sorted((a, b) -> a.priority() != b.priority() ? Integer.compare(b.priority(), a.priority())
            : a.name().compareTo(b.name()))
        .map(QosClass::name).toList();
  }
}
