package dev.bulletin.runtime.pool;

import dev.bulletin.protocol.Text;
import java.time.Duration;
import java.util.Optional;
import java.util.regex.Pattern;

/**
 * One worker pool: where its workers come from, what each offers, and the scaling bounds. Built
 * by {@link PoolsConfig#parse}; validated once here, so the policy and providers trust it.
 *
 * @param name pool name; letters, digits, '-' and '_' (it appears in Slurm job names)
 * @param provider where workers come from
 * @param worker the shape of one worker
 * @param minWorkers workers kept even when idle
 * @param maxWorkers the most workers (allocations) the pool holds at once, draining ones included
 * @param warmWorkers idle workers kept ready beyond the demand, within maxWorkers
 * @param idleTimeout an idle worker above the minimum and warm buffer is stopped after this long
 * @param replaceBeforeExpiry a worker this close to its walltime is drained and replaced
 * @param startTimeout a worker whose process or job runs but has not registered after this long
 *     is stopped and counts as a failed launch (time waiting in the Slurm queue does not count);
 *     zero waits forever
 * @param backoffInitial wait after the first failed launch; doubles per failure in a row
 * @param backoffMax the longest wait between launch attempts
 * @param python the interpreter with the bulletin package on the worker hosts; empty = the
 *     runtime's own {@code --python}
 * @param slurm Slurm options (provider slurm)
 * @param local local options (provider local)
 * @param kubernetes Kubernetes options (provider kubernetes)
 */
public record PoolConfig(
    String name,
    ProviderKind provider,
    WorkerShape worker,
    int minWorkers,
    int maxWorkers,
    int warmWorkers,
    Duration idleTimeout,
    Duration replaceBeforeExpiry,
    Duration startTimeout,
    Duration backoffInitial,
    Duration backoffMax,
    Optional<String> python,
    SlurmOptions slurm,
    LocalOptions local,
    KubernetesOptions kubernetes) {

  public static final Duration DEFAULT_IDLE_TIMEOUT = Duration.ofMinutes(5);
  public static final Duration DEFAULT_BACKOFF_INITIAL = Duration.ofSeconds(5);
  public static final Duration DEFAULT_BACKOFF_MAX = Duration.ofMinutes(5);
  private static final Pattern NAME = Pattern.compile("[A-Za-z0-9][A-Za-z0-9_-]{0,31}");

  public PoolConfig {
    if (name == null || !NAME.matcher(name).matches()) {
      throw new IllegalArgumentException("name: '" + name + "' is not a pool name; use 1 to 32"
          + " letters, digits, '-' or '_', starting with a letter or digit");
    }
    if (provider == null || worker == null || slurm == null || local == null || kubernetes == null
        || python == null) {
      throw new IllegalArgumentException("pool " + name + ": provider, worker, slurm, local,"
          + " kubernetes and python must be given");
    }
    if (provider == ProviderKind.KUBERNETES && kubernetes.image().isEmpty()
        && kubernetes.podTemplate().isEmpty()) {
      throw new IllegalArgumentException("kubernetes.image is required for provider kubernetes"
          + " (the worker image, with bulletin's Python package), unless kubernetes.pod_template"
          + " names one");
    }
    if (minWorkers < 0) {
      throw new IllegalArgumentException("min_workers must be >= 0, got " + minWorkers);
    }
    if (maxWorkers < 1) {
      throw new IllegalArgumentException("max_workers must be >= 1, got " + maxWorkers);
    }
    if (maxWorkers < minWorkers) {
      throw new IllegalArgumentException("max_workers (" + maxWorkers + ") must be >= min_workers ("
          + minWorkers + ")");
    }
    if (warmWorkers < 0 || warmWorkers > maxWorkers) {
      throw new IllegalArgumentException("warm_workers must be 0..max_workers (" + maxWorkers
          + "), got " + warmWorkers);
    }
    requireNonNegative("idle_timeout", idleTimeout);
    requireNonNegative("replace_before_expiry", replaceBeforeExpiry);
    requireNonNegative("start_timeout", startTimeout);
    requireNonNegative("launch_backoff.initial", backoffInitial);
    requireNonNegative("launch_backoff.max", backoffMax);
    if (backoffMax.compareTo(backoffInitial) < 0) {
      throw new IllegalArgumentException("launch_backoff.max (" + Text.duration(backoffMax)
          + ") must be >= launch_backoff.initial (" + Text.duration(backoffInitial) + ")");
    }
    if (provider == ProviderKind.SLURM && worker.walltime().isZero()) {
      throw new IllegalArgumentException("worker.walltime is required for provider slurm (the"
          + " job's --time, e.g. 4h or 04:00:00)");
    }
    if (!worker.walltime().isZero() && replaceBeforeExpiry.compareTo(worker.walltime()) >= 0) {
      throw new IllegalArgumentException("replace_before_expiry (" + Text.duration(replaceBeforeExpiry)
          + ") must be shorter than worker.walltime (" + Text.duration(worker.walltime()) + ")");
    }
  }

  private static void requireNonNegative(String field, Duration value) {
    if (value == null || value.isNegative()) {
      throw new IllegalArgumentException(field + " must be a duration >= 0, got " + value);
    }
  }

  /** Defaults for everything but the name, provider and shape; tests and code start here. */
  public static PoolConfig of(String name, ProviderKind provider, WorkerShape worker, int min, int max) {
    return new PoolConfig(name, provider, worker, min, max, 0, DEFAULT_IDLE_TIMEOUT,
        defaultReplaceBeforeExpiry(worker), defaultStartTimeout(provider), DEFAULT_BACKOFF_INITIAL,
        DEFAULT_BACKOFF_MAX, Optional.empty(), SlurmOptions.defaults(), LocalOptions.defaults(),
        KubernetesOptions.defaults());
  }

  /** A Kubernetes pool with defaults for the rest: its options name at least the image. */
  public static PoolConfig kubernetes(String name, WorkerShape worker, int min, int max,
      KubernetesOptions options) {
    return new PoolConfig(name, ProviderKind.KUBERNETES, worker, min, max, 0, DEFAULT_IDLE_TIMEOUT,
        defaultReplaceBeforeExpiry(worker), defaultStartTimeout(ProviderKind.KUBERNETES),
        DEFAULT_BACKOFF_INITIAL, DEFAULT_BACKOFF_MAX, Optional.empty(), SlurmOptions.defaults(),
        LocalOptions.defaults(), options);
  }

  /** 10 minutes, or a quarter of a shorter walltime; none without a walltime. */
  public static Duration defaultReplaceBeforeExpiry(WorkerShape worker) {
    if (worker.walltime().isZero()) {
      return Duration.ZERO;
    }
    Duration quarter = worker.walltime().dividedBy(4);
    return quarter.compareTo(Duration.ofMinutes(10)) < 0 ? quarter : Duration.ofMinutes(10);
  }

  /**
   * A local worker that has not registered 2 minutes after its process started is broken; a Slurm
   * job or a Pod gets 5 minutes from when it starts running (shared file systems make imports
   * slow; time waiting for a node or an image pull does not count).
   */
  public static Duration defaultStartTimeout(ProviderKind provider) {
    return provider == ProviderKind.LOCAL ? Duration.ofMinutes(2) : Duration.ofMinutes(5);
  }

  public PoolConfig withWarm(int warm) {
    return new PoolConfig(name, provider, worker, minWorkers, maxWorkers, warm, idleTimeout,
        replaceBeforeExpiry, startTimeout, backoffInitial, backoffMax, python, slurm, local, kubernetes);
  }

  public PoolConfig withTimeouts(Duration idle, Duration replaceBefore, Duration start) {
    return new PoolConfig(name, provider, worker, minWorkers, maxWorkers, warmWorkers, idle,
        replaceBefore, start, backoffInitial, backoffMax, python, slurm, local, kubernetes);
  }

  public PoolConfig withSlurm(SlurmOptions options) {
    return new PoolConfig(name, provider, worker, minWorkers, maxWorkers, warmWorkers, idleTimeout,
        replaceBeforeExpiry, startTimeout, backoffInitial, backoffMax, python, options, local, kubernetes);
  }

  public PoolConfig withKubernetes(KubernetesOptions options) {
    return new PoolConfig(name, provider, worker, minWorkers, maxWorkers, warmWorkers, idleTimeout,
        replaceBeforeExpiry, startTimeout, backoffInitial, backoffMax, python, slurm, local, options);
  }

  public PoolConfig withLocal(LocalOptions options) {
    return new PoolConfig(name, provider, worker, minWorkers, maxWorkers, warmWorkers, idleTimeout,
        replaceBeforeExpiry, startTimeout, backoffInitial, backoffMax, python, slurm, options, kubernetes);
  }
}
