package dev.bulletin.runtime.scheduler.policy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Reads the {@code qos:}, {@code groups:}, {@code limits:} and {@code scheduler:} sections of the
 * runtime's YAML file into a {@link PolicyConfig}. Every section is optional; what is left out
 * keeps its default. Errors name the field (e.g. {@code qos.batch.max_walltime}) and what it
 * accepts. The format is documented in {@code docs/scheduler.md}.
 */
public final class PolicyYaml {

  /** The top-level keys this class reads. */
  public static final Set<String> SECTIONS = Set.of("qos", "groups", "limits", "scheduler");

  private PolicyYaml() {}

  /** Parses a YAML document holding (some of) the policy sections; other keys are ignored. */
  public static PolicyConfig parse(String yaml) {
    try {
      JsonNode root = new ObjectMapper(new YAMLFactory()).readTree(yaml);
      return parse(root);
    } catch (IOException e) {
      throw new IllegalArgumentException("policy: not valid YAML: " + e.getMessage(), e);
    }
  }

  /** Reads the policy sections of a parsed config document (null or missing: defaults). */
  public static PolicyConfig parse(JsonNode root) {
    PolicyConfig config = PolicyConfig.defaults();
    if (root == null || root.isNull() || root.isMissingNode()) {
      return config;
    }
    if (!root.isObject()) {
      throw new IllegalArgumentException("config: expected a mapping at the top level");
    }
    Map<String, QosClass> qos = qos(root.get("qos"));
    Fields scheduler = new Fields(root.get("scheduler"), "scheduler", "default_qos",
        "fair_share_horizon", "preemption_grace", "reclaim_patience", "candidates", "max_preemptors_per_pass",
        "locality_min_bytes", "credits", "weights");
    Fields credits = scheduler.child("credits", "per_idle_gpu_hour", "max_balance");
    Fields weights = scheduler.child("weights", "topology", "locality", "packing");
    Weights defaultWeights = config.weights();
    List<UserLimit> limits = new ArrayList<>();
    UserLimit defaultLimit = limits(root.get("limits"), limits);
    return new PolicyConfig(
        qos,
        scheduler.string("default_qos", config.defaultQos()),
        groups(root.get("groups")),
        limits,
        defaultLimit,
        new CreditRule(credits.number("per_idle_gpu_hour", config.credits().perIdleGpuHour()),
            credits.numberOrUnlimited("max_balance", config.credits().maxBalance())),
        new Weights(weights.number("topology", defaultWeights.topology()),
            weights.number("locality", defaultWeights.locality()),
            weights.number("packing", defaultWeights.packing()),
            (long) scheduler.number("locality_min_bytes", defaultWeights.localityMinBytes())),
        scheduler.duration("fair_share_horizon", config.fairShareHorizon()),
        scheduler.duration("preemption_grace", config.preemptionGrace()),
        scheduler.number("reclaim_patience", config.reclaimPatience()),
        scheduler.integer("candidates", config.candidateLimit()),
        scheduler.integer("max_preemptors_per_pass", config.maxPreemptorsPerPass()));
  }

  /** Classes named like a default one change only the fields given; new names are added. */
  private static Map<String, QosClass> qos(JsonNode section) {
    Map<String, QosClass> classes = new LinkedHashMap<>(PolicyConfig.defaultQosClasses());
    for (Map.Entry<String, JsonNode> entry : entries(section, "qos")) {
      String name = entry.getKey();
      Fields fields = new Fields(entry.getValue(), "qos." + name, "priority", "max_walltime",
          "max_calls_per_user", "preemptible");
      QosClass base = classes.get(name);
      if (base == null && !fields.has("priority")) {
        throw new IllegalArgumentException("qos." + name + ".priority is required for a new class"
            + " (interactive is 100, batch 50, scavenger 0)");
      }
      base = base != null ? base : new QosClass(name, 0, Duration.ofDays(7),
          QosClass.UNLIMITED, false);
      classes.put(name, new QosClass(name,
          fields.integer("priority", base.priority()),
          fields.duration("max_walltime", base.maxWalltime()),
          fields.integerOrUnlimited("max_calls_per_user", base.maxCallsPerUser()),
          fields.bool("preemptible", base.preemptible())));
    }
    return classes;
  }

  private static Map<String, GroupQuota> groups(JsonNode section) {
    Map<String, GroupQuota> groups = new LinkedHashMap<>();
    for (Map.Entry<String, JsonNode> entry : entries(section, "groups")) {
      String name = entry.getKey();
      Fields fields = new Fields(entry.getValue(), "groups." + name, "gpus", "gpu_hours",
          "period", "borrow", "weight", "lend");
      GroupQuota base = GroupQuota.unlimited(name);
      int gpus = fields.integerOrUnlimited("gpus", base.maxGpus());
      groups.put(name, new GroupQuota(name, gpus,
          fields.numberOrUnlimited("gpu_hours", base.gpuHoursPerPeriod()),
          fields.duration("period", base.period()),
          fields.bool("borrow", base.borrow()),
          fields.number("weight", base.weight()),
          fields.integerOrUnlimited("lend", gpus)));
    }
    return groups;
  }

  /** Fills {@code profiles}; returns the {@code default} profile (no limits if absent). */
  private static UserLimit limits(JsonNode section, List<UserLimit> profiles) {
    UserLimit defaultLimit = UserLimit.none();
    for (Map.Entry<String, JsonNode> entry : entries(section, "limits")) {
      String name = entry.getKey();
      boolean isDefault = name.equals(UserLimit.DEFAULT);
      Fields fields = isDefault
          ? new Fields(entry.getValue(), "limits." + name, "gpus", "calls", "max_walltime")
          : new Fields(entry.getValue(), "limits." + name, "gpus", "calls", "max_walltime",
              "users");
      UserLimit limit = new UserLimit(name,
          fields.integerOrUnlimited("gpus", UserLimit.UNLIMITED),
          fields.integerOrUnlimited("calls", UserLimit.UNLIMITED),
          fields.duration("max_walltime", Durations.UNLIMITED),
          isDefault ? Set.of() : fields.strings("users"));
      if (isDefault) {
        defaultLimit = limit;
      } else {
        profiles.add(limit);
      }
    }
    return defaultLimit;
  }

  private static List<Map.Entry<String, JsonNode>> entries(JsonNode section, String path) {
    List<Map.Entry<String, JsonNode>> entries = new ArrayList<>();
    if (section == null || section.isNull()) {
      return entries;
    }
    if (!section.isObject()) {
      throw new IllegalArgumentException(path + ": expected a mapping of names to settings");
    }
    section.fields().forEachRemaining(entries::add);
    return entries;
  }

  /** One mapping of the file with its path, its allowed keys and typed getters. */
  private static final class Fields {
    private final JsonNode node;
    private final String path;

    Fields(JsonNode node, String path, String... allowed) {
      this.node = node == null || node.isNull() ? null : node;
      this.path = path;
      if (this.node == null) {
        return;
      }
      if (!node.isObject()) {
        throw new IllegalArgumentException(path + ": expected a mapping (allowed fields: "
            + String.join(", ", allowed) + ")");
      }
      Set<String> known = new LinkedHashSet<>(List.of(allowed));
      for (Iterator<String> names = node.fieldNames(); names.hasNext(); ) {
        String name = names.next();
        if (!known.contains(name)) {
          throw new IllegalArgumentException(path + ": unknown field '" + name + "' (allowed: "
              + String.join(", ", allowed) + ")");
        }
      }
    }

    Fields child(String name, String... allowed) {
      return new Fields(node == null ? null : node.get(name), path + "." + name, allowed);
    }

    boolean has(String name) {
      return node != null && node.has(name) && !node.get(name).isNull();
    }

    private JsonNode get(String name) {
      return has(name) ? node.get(name) : null;
    }

    private IllegalArgumentException wrong(String name, String expected) {
      return new IllegalArgumentException(path + "." + name + ": expected " + expected + ", got '"
          + node.get(name).asText() + "'");
    }

    String string(String name, String fallback) {
      JsonNode value = get(name);
      if (value == null) {
        return fallback;
      }
      if (!value.isTextual()) {
        throw wrong(name, "a name");
      }
      return value.asText();
    }

    int integer(String name, int fallback) {
      JsonNode value = get(name);
      if (value == null) {
        return fallback;
      }
      if (!value.canConvertToInt() || !value.isIntegralNumber()) {
        throw wrong(name, "an integer");
      }
      return value.asInt();
    }

    int integerOrUnlimited(String name, int fallback) {
      JsonNode value = get(name);
      if (value != null && value.isTextual() && value.asText().equals("unlimited")) {
        return Integer.MAX_VALUE;
      }
      if (value != null && !value.isIntegralNumber()) {
        throw wrong(name, "an integer or unlimited");
      }
      return integer(name, fallback);
    }

    double number(String name, double fallback) {
      JsonNode value = get(name);
      if (value == null) {
        return fallback;
      }
      if (!value.isNumber()) {
        throw wrong(name, "a number");
      }
      return value.asDouble();
    }

    double numberOrUnlimited(String name, double fallback) {
      JsonNode value = get(name);
      if (value != null && value.isTextual() && value.asText().equals("unlimited")) {
        return Double.POSITIVE_INFINITY;
      }
      if (value != null && !value.isNumber()) {
        throw wrong(name, "a number or unlimited");
      }
      return number(name, fallback);
    }

    boolean bool(String name, boolean fallback) {
      JsonNode value = get(name);
      if (value == null) {
        return fallback;
      }
      if (!value.isBoolean()) {
        throw wrong(name, "true or false");
      }
      return value.asBoolean();
    }

    Duration duration(String name, Duration fallback) {
      JsonNode value = get(name);
      if (value == null) {
        return fallback;
      }
      if (value.isIntegralNumber()) {
        return Duration.ofSeconds(value.asLong());
      }
      return Durations.parse(path + "." + name, value.asText());
    }

    Set<String> strings(String name) {
      JsonNode value = get(name);
      Set<String> result = new LinkedHashSet<>();
      if (value == null) {
        return result;
      }
      if (!value.isArray()) {
        throw wrong(name, "a list of user names");
      }
      for (JsonNode item : value) {
        if (!item.isTextual() || item.asText().isBlank()) {
          throw new IllegalArgumentException(path + "." + name + ": expected user names, got '"
              + item + "'");
        }
        result.add(item.asText());
      }
      return result;
    }
  }
}
