package dev.bulletin.runtime.pool;

import com.fasterxml.jackson.annotation.JsonCreator;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;

/**
 * The {@code pools:} section of the runtime's YAML file (see docs/pools.md). No section means no
 * pools: the embedded worker (and workers started by hand) only.
 */
public record PoolsConfig(List<PoolConfig> pools) {

  public PoolsConfig {
    pools = List.copyOf(pools);
    Set<String> names = new HashSet<>();
    for (PoolConfig pool : pools) {
      if (!names.add(pool.name())) {
        throw new IllegalArgumentException("pools: the name '" + pool.name() + "' is used twice;"
            + " pool names must be unique");
      }
    }
  }

  public static PoolsConfig none() {
    return new PoolsConfig(List.of());
  }

  public Optional<PoolConfig> pool(String name) {
    return pools.stream().filter(p -> p.name().equals(name)).findFirst();
  }

  /** Parses a whole YAML document that has a {@code pools:} key (tests, tools). */
  public static PoolsConfig parseYaml(String yaml) {
    try {
      JsonNode root = new ObjectMapper(new YAMLFactory()).readTree(yaml);
      return root == null || !root.has("pools") ? none() : fromJson(root.get("pools"));
    } catch (IOException e) {
      throw new IllegalArgumentException("pools: not valid YAML: " + e.getMessage(), e);
    }
  }

  /** Jackson entry point for RuntimeConfig: the value of the {@code pools:} key. */
  @JsonCreator(mode = JsonCreator.Mode.DELEGATING)
  public static PoolsConfig fromJson(JsonNode node) {
    if (node == null || node.isNull()) {
      return none();
    }
    if (!node.isArray()) {
      throw new IllegalArgumentException("pools: must be a list of pools (each starting with"
          + " '- name: ...'), got a " + node.getNodeType().toString().toLowerCase());
    }
    List<PoolConfig> pools = new ArrayList<>();
    for (int i = 0; i < node.size(); i++) {
      JsonNode item = node.get(i);
      String label = "pools[" + i + "]" + (item != null && item.hasNonNull("name")
          ? " (" + item.get("name").asText() + ")" : "");
      pools.add(parsePool(new ConfigNode(item, label)));
    }
    return new PoolsConfig(pools);
  }

  private static PoolConfig parsePool(ConfigNode n) {
    String name = n.requiredString("name", "gpu");
    ProviderKind provider;
    try {
      provider = ProviderKind.parse(n.requiredString("provider", ProviderKind.allowed()));
    } catch (IllegalArgumentException e) {
      throw n.error("provider", e.getMessage());
    }
    ConfigNode w = n.child("worker").orElseThrow(() -> n.error("worker",
        "is required (for example: {gpus: 1, cpus: 8, memory: 32GiB, walltime: 4h})"));
    WorkerShape shape = wrap(w, () -> new WorkerShape(w.integer("gpus", 0, 0),
        w.integer("cpus", 1, 1), w.size("memory").orElse(0L),
        w.duration("walltime").orElse(Duration.ZERO)));
    w.rejectUnknown();

    int min = n.integer("min_workers", 0, 0);
    int max = n.has("max_workers") ? n.integer("max_workers", 1, 1)
        : throwRequired(n, "max_workers", "4");
    int warm = n.integer("warm_workers", 0, 0);
    Duration idle = n.duration("idle_timeout").orElse(PoolConfig.DEFAULT_IDLE_TIMEOUT);
    Duration replace = n.duration("replace_before_expiry")
        .orElse(PoolConfig.defaultReplaceBeforeExpiry(shape));
    Duration start = n.duration("start_timeout").orElse(PoolConfig.defaultStartTimeout(provider));
    Duration backoffInitial = PoolConfig.DEFAULT_BACKOFF_INITIAL;
    Duration backoffMax = PoolConfig.DEFAULT_BACKOFF_MAX;
    Optional<ConfigNode> backoff = n.child("launch_backoff");
    if (backoff.isPresent()) {
      backoffInitial = backoff.get().duration("initial").orElse(backoffInitial);
      backoffMax = backoff.get().duration("max").orElse(backoffMax);
      backoff.get().rejectUnknown();
    }
    Optional<String> python = n.string("python").filter(s -> !s.isEmpty());

    SlurmOptions slurm = SlurmOptions.defaults();
    Optional<ConfigNode> s = n.child("slurm");
    if (s.isPresent()) {
      if (provider != ProviderKind.SLURM) {
        throw n.error("slurm", "options for provider slurm, but this pool's provider is "
            + provider.configName());
      }
      ConfigNode sn = s.get();
      slurm = wrap(sn, () -> new SlurmOptions(sn.string("partition"), sn.string("account"),
          sn.string("qos"), sn.strings("extra_args"), sn.bool("simulate_gpus", false),
          sn.string("log_dir")));
      sn.rejectUnknown();
    }
    LocalOptions local = LocalOptions.defaults();
    Optional<ConfigNode> l = n.child("local");
    if (l.isPresent()) {
      if (provider != ProviderKind.LOCAL) {
        throw n.error("local", "options for provider local, but this pool's provider is "
            + provider.configName());
      }
      ConfigNode ln = l.get();
      local = wrap(ln, () -> new LocalOptions(ln.bool("simulate_gpus", false),
          ln.duration("terminate_grace").orElse(LocalOptions.defaults().terminateGrace())));
      ln.rejectUnknown();
    }
    n.rejectUnknown();
    Duration initial = backoffInitial;
    Duration maxBackoff = backoffMax;
    SlurmOptions slurmOptions = slurm;
    LocalOptions localOptions = local;
    return wrap(n, () -> new PoolConfig(name, provider, shape, min, max, warm, idle, replace, start,
        initial, maxBackoff, python, slurmOptions, localOptions));
  }

  private static int throwRequired(ConfigNode n, String key, String example) {
    throw n.error(key, "is required (for example: " + example + ")");
  }

  private interface Build<T> {
    T build();
  }

  /** Record validation speaks of fields relative to the pool; prefix the pool's path. */
  private static <T> T wrap(ConfigNode n, Build<T> build) {
    try {
      return build.build();
    } catch (IllegalArgumentException e) {
      String message = e.getMessage();
      if (message.startsWith(n.path())) {
        throw e;
      }
      String prefix = n.path();
      // A shape or option record names its field from its own block ("worker.gpus ..."); the
      // pool's path already ends with that block's name.
      int dot = prefix.lastIndexOf('.');
      if (dot > 0 && message.startsWith(prefix.substring(dot + 1) + ".")) {
        prefix = prefix.substring(0, dot);
      }
      throw new IllegalArgumentException(prefix + "." + message, e);
    }
  }
}
