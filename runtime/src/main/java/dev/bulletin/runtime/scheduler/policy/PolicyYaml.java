package dev.bulletin.runtime.scheduler.policy;

import dev.bulletin.protocol.Quantities;
import dev.bulletin.runtime.config.ConfigNode;
import dev.bulletin.runtime.config.ConfigYaml;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * Reads the {@code qos:}, {@code groups:}, {@code limits:} and {@code scheduler:} sections of the
 * runtime's YAML file into a {@link PolicyConfig}. Every section is optional; what is left out
 * keeps its default. Errors name the field (e.g. {@code qos.batch.max_walltime}) and what it
 * accepts. The format is documented in {@code docs/scheduler.md}.
 */
public final class PolicyYaml {

  private PolicyYaml() {}

  /** Parses a YAML document holding (some of) the policy sections; other keys are ignored. */
  public static PolicyConfig parse(String yaml) {
    return ConfigYaml.readSection(yaml, PolicyYaml::read);
  }

  /**
   * Reads the policy sections of the config document (absent: the defaults). Mistakes go to the
   * document's errors; empty when there were any.
   */
  public static Optional<PolicyConfig> read(ConfigNode document) {
    ConfigNode root = document.scope();
    PolicyConfig defaults = PolicyConfig.defaults();
    Map<String, QosClass> qos = qos(root);
    Map<String, GroupQuota> groups = groups(root);
    List<UserLimit> limits = new ArrayList<>();
    UserLimit defaultLimit = limits(root, limits);
    ConfigNode scheduler = root.section("scheduler");
    String defaultQos = scheduler.name("default_qos", defaults.defaultQos());
    Duration horizon = scheduler.durationOrUnlimited("fair_share_horizon",
        defaults.fairShareHorizon());
    Duration grace = scheduler.durationOrUnlimited("preemption_grace", defaults.preemptionGrace());
    double patience = scheduler.number("reclaim_patience", defaults.reclaimPatience());
    int candidates = scheduler.integer("candidates", defaults.candidateLimit());
    int preemptors = scheduler.integer("max_preemptors_per_pass", defaults.maxPreemptorsPerPass());
    double localityMinBytes = scheduler.number("locality_min_bytes",
        defaults.weights().localityMinBytes());
    ConfigNode credits = scheduler.section("credits");
    double perIdleGpuHour = credits.number("per_idle_gpu_hour", defaults.credits().perIdleGpuHour());
    double maxBalance = credits.numberOrUnlimited("max_balance", defaults.credits().maxBalance());
    credits.rejectUnknown();
    ConfigNode backfill = scheduler.section("backfill");
    Backfill b = defaults.backfill();
    Duration backfillAfter = backfill.durationOrUnlimited("after", b.after());
    int backfillMinGpus = backfillMinGpus(backfill, b.minGpus());
    int reservations = backfill.integer("max_reservations", b.maxReservations());
    backfill.rejectUnknown();
    ConfigNode weights = scheduler.section("weights");
    Weights w = defaults.weights();
    double topology = weights.number("topology", w.topology());
    double locality = weights.number("locality", w.locality());
    double packing = weights.number("packing", w.packing());
    weights.rejectUnknown();
    scheduler.rejectUnknown();
    return root.build(() -> new PolicyConfig(qos, defaultQos, groups, limits, defaultLimit,
        new CreditRule(perIdleGpuHour, maxBalance),
        new Weights(topology, locality, packing, (long) localityMinBytes),
        horizon, grace, patience, candidates, preemptors,
        new Backfill(backfillAfter, backfillMinGpus, reservations)));
  }

  /** Classes named like a default one change only the fields given; new names are added. */
  private static Map<String, QosClass> qos(ConfigNode root) {
    Map<String, QosClass> classes = new LinkedHashMap<>(PolicyConfig.defaultQosClasses());
    for (Map.Entry<String, ConfigNode> entry : root.named("qos")) {
      String name = entry.getKey();
      ConfigNode fields = entry.getValue();
      QosClass base = classes.get(name);
      if (base == null && !fields.has("priority")) {
        fields.error("priority", "is required for a new class (interactive is 100, batch 50,"
            + " scavenger 0)");
      }
      QosClass from = base != null ? base
          : new QosClass(name, 0, Duration.ofDays(7), QosClass.UNLIMITED, false);
      int priority = fields.integer("priority", from.priority());
      Duration walltime = fields.durationOrUnlimited("max_walltime", from.maxWalltime());
      int calls = fields.integerOrUnlimited("max_calls_per_user", from.maxCallsPerUser());
      boolean preemptible = fields.bool("preemptible", from.preemptible());
      fields.rejectUnknown();
      fields.build(() -> new QosClass(name, priority, walltime, calls, preemptible))
          .ifPresent(q -> classes.put(name, q));
    }
    return classes;
  }

  private static Map<String, GroupQuota> groups(ConfigNode root) {
    Map<String, GroupQuota> groups = new LinkedHashMap<>();
    for (Map.Entry<String, ConfigNode> entry : root.named("groups")) {
      String name = entry.getKey();
      ConfigNode fields = entry.getValue();
      GroupQuota base = GroupQuota.unlimited(name);
      int gpus = fields.integerOrUnlimited("gpus", base.maxGpus());
      double gpuHours = fields.numberOrUnlimited("gpu_hours", base.gpuHoursPerPeriod());
      Duration period = fields.durationOrUnlimited("period", base.period());
      boolean borrow = fields.bool("borrow", base.borrow());
      double weight = fields.number("weight", base.weight());
      int lend = fields.integerOrUnlimited("lend", gpus);
      fields.rejectUnknown();
      fields.build(() -> new GroupQuota(name, gpus, gpuHours, period, borrow, weight, lend))
          .ifPresent(g -> groups.put(name, g));
    }
    return groups;
  }

  /** Fills {@code profiles}; returns the {@code default} profile (no limits if absent). */
  private static UserLimit limits(ConfigNode root, List<UserLimit> profiles) {
    UserLimit defaultLimit = UserLimit.none();
    for (Map.Entry<String, ConfigNode> entry : root.named("limits")) {
      String name = entry.getKey();
      ConfigNode fields = entry.getValue();
      boolean isDefault = name.equals(UserLimit.DEFAULT);
      int gpus = fields.integerOrUnlimited("gpus", UserLimit.UNLIMITED);
      int calls = fields.integerOrUnlimited("calls", UserLimit.UNLIMITED);
      Duration walltime = fields.durationOrUnlimited("max_walltime", Quantities.UNLIMITED);
      // The default profile is everyone not named elsewhere: a list of users makes no sense there.
      List<String> users = isDefault ? List.of() : fields.strings("users", "[carl, dana]");
      fields.rejectUnknown();
      Optional<UserLimit> limit = fields.build(() -> new UserLimit(name, gpus, calls, walltime,
          new LinkedHashSet<>(users)));
      if (limit.isPresent() && isDefault) {
        defaultLimit = limit.get();
      } else {
        limit.ifPresent(profiles::add);
      }
    }
    return defaultLimit;
  }

  /** {@code backfill.min_gpus}: a number of GPUs, or {@code whole-worker}. */
  private static int backfillMinGpus(ConfigNode backfill, int fallback) {
    String text = backfill.string("min_gpus").orElse(null);
    if ("whole-worker".equals(text)) {
      return Backfill.WHOLE_WORKER;
    }
    if (text != null && !text.matches("-?[0-9]+")) {
      backfill.error("min_gpus", "expected an integer >= 1 or whole-worker, got '" + text + "'");
      return fallback;
    }
    return backfill.integer("min_gpus", fallback, 1);
  }
}
