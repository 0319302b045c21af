package dev.bulletin.runtime.pool;

import dev.bulletin.runtime.config.ConfigNode;
import dev.bulletin.runtime.config.ConfigYaml;
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
    return ConfigYaml.readSection(yaml, PoolsConfig::read);
  }

  /**
   * Reads the {@code pools:} section of the config document (absent: no pools). Mistakes go to
   * the document's errors; empty when there were any.
   */
  public static Optional<PoolsConfig> read(ConfigNode document) {
    ConfigNode root = document.scope();
    List<PoolConfig> pools = new ArrayList<>();
    for (ConfigNode pool : root.list("pools", "pools (each starting with '- name: ...')")) {
      readPool(pool).ifPresent(pools::add);
    }
    return root.build(() -> new PoolsConfig(pools));
  }

  private static Optional<PoolConfig> readPool(ConfigNode n) {
    Optional<String> name = n.requiredString("name", "gpu");
    Optional<ProviderKind> provider = n.requiredString("provider", ProviderKind.allowed())
        .flatMap(text -> provider(n, text));
    Optional<WorkerShape> shape = worker(n);
    int min = n.integer("min_workers", 0, 0);
    int max = n.integer("max_workers", 1, 1);
    if (!n.has("max_workers")) {
      n.error("max_workers", "is required (for example: 4)");
    }
    int warm = n.integer("warm_workers", 0, 0);
    Duration idle = n.duration("idle_timeout").orElse(PoolConfig.DEFAULT_IDLE_TIMEOUT);
    Optional<Duration> replace = n.duration("replace_before_expiry");
    Optional<Duration> start = n.duration("start_timeout");
    Duration backoffInitial = PoolConfig.DEFAULT_BACKOFF_INITIAL;
    Duration backoffMax = PoolConfig.DEFAULT_BACKOFF_MAX;
    Optional<ConfigNode> backoff = n.mapping("launch_backoff");
    if (backoff.isPresent()) {
      backoffInitial = backoff.get().duration("initial").orElse(backoffInitial);
      backoffMax = backoff.get().duration("max").orElse(backoffMax);
      backoff.get().rejectUnknown();
    }
    Optional<String> python = n.string("python").filter(s -> !s.isEmpty());
    SlurmOptions slurm = providerOptions(n, "slurm", ProviderKind.SLURM, provider)
        .flatMap(PoolsConfig::slurm).orElse(SlurmOptions.defaults());
    LocalOptions local = providerOptions(n, "local", ProviderKind.LOCAL, provider)
        .flatMap(PoolsConfig::local).orElse(LocalOptions.defaults());
    KubernetesOptions kubernetes = providerOptions(n, "kubernetes", ProviderKind.KUBERNETES, provider)
        .flatMap(KubernetesConfig::read).orElse(KubernetesOptions.defaults());
    n.rejectUnknown();
    Duration initial = backoffInitial;
    Duration maxBackoff = backoffMax;
    // Built only when every field read well: then name, provider and shape are there.
    return n.build(() -> new PoolConfig(name.orElseThrow(), provider.orElseThrow(),
        shape.orElseThrow(), min, max, warm, idle,
        replace.orElse(PoolConfig.defaultReplaceBeforeExpiry(shape.orElseThrow())),
        start.orElse(PoolConfig.defaultStartTimeout(provider.orElseThrow())), initial,
        maxBackoff, python, slurm, local, kubernetes));
  }

  private static Optional<ProviderKind> provider(ConfigNode n, String text) {
    try {
      return Optional.of(ProviderKind.parse(text));
    } catch (IllegalArgumentException e) {
      n.error("provider", e.getMessage());
      return Optional.empty();
    }
  }

  private static Optional<WorkerShape> worker(ConfigNode n) {
    if (!n.has("worker")) {
      n.error("worker", "is required (for example: {gpus: 1, cpus: 8, memory: 32GiB, walltime: 4h})");
      return Optional.empty();
    }
    return n.mapping("worker").flatMap(w -> {
      int gpus = w.integer("gpus", 0, 0);
      int cpus = w.integer("cpus", 1, 1);
      long memory = w.size("memory").orElse(0L);
      Duration walltime = w.duration("walltime").orElse(Duration.ZERO);
      w.rejectUnknown();
      return w.build(() -> new WorkerShape(gpus, cpus, memory, walltime));
    });
  }

  /** The block of one provider's options, refused on a pool of another provider. */
  private static Optional<ConfigNode> providerOptions(ConfigNode n, String key, ProviderKind kind,
      Optional<ProviderKind> provider) {
    if (n.has(key) && provider.isPresent() && provider.get() != kind) {
      n.error(key, "options for provider " + kind.configName() + ", but this pool's provider is "
          + provider.get().configName());
      return Optional.empty();
    }
    return n.mapping(key);
  }

  private static Optional<SlurmOptions> slurm(ConfigNode s) {
    Optional<String> partition = s.string("partition");
    Optional<String> account = s.string("account");
    Optional<String> qos = s.string("qos");
    List<String> extraArgs = s.strings("extra_args", "[\"--constraint=a100\"]");
    boolean simulateGpus = s.bool("simulate_gpus", false);
    Optional<String> logDir = s.string("log_dir");
    s.rejectUnknown();
    return s.build(() -> new SlurmOptions(partition, account, qos, extraArgs, simulateGpus, logDir));
  }

  private static Optional<LocalOptions> local(ConfigNode l) {
    boolean simulateGpus = l.bool("simulate_gpus", false);
    Duration grace = l.duration("terminate_grace").orElse(LocalOptions.defaults().terminateGrace());
    l.rejectUnknown();
    return l.build(() -> new LocalOptions(simulateGpus, grace));
  }
}
