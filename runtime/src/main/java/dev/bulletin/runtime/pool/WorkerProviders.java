package dev.bulletin.runtime.pool;

import dev.bulletin.runtime.pool.impl.KubernetesAccess;
import dev.bulletin.runtime.pool.impl.KubernetesProvider;
import dev.bulletin.runtime.pool.impl.LocalProvider;
import dev.bulletin.runtime.pool.impl.SlurmProvider;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/** Builds providers and checks, at start-up, what only the provider can check. */
public final class WorkerProviders {
  private WorkerProviders() {}

  public static WorkerProvider create(ProviderKind kind, ProviderContext context) {
    return create(kind, context, Set.of());
  }

  /**
   * @param namespaces the Kubernetes namespaces the pools use (watched from the start, so that a
   *     restarted runtime finds its Pods); "" = the client's namespace
   */
  public static WorkerProvider create(ProviderKind kind, ProviderContext context,
      Set<String> namespaces) {
    return switch (kind) {
      case SLURM -> new SlurmProvider(context);
      case LOCAL -> new LocalProvider(context);
      case KUBERNETES -> KubernetesProvider.connect(context, namespaces);
    };
  }

  /** One provider per kind the pools use. */
  public static Map<ProviderKind, WorkerProvider> forPools(PoolsConfig pools, ProviderContext context) {
    Map<ProviderKind, WorkerProvider> providers = new EnumMap<>(ProviderKind.class);
    Set<String> namespaces = new TreeSet<>();
    pools.pools().stream().filter(p -> p.provider() == ProviderKind.KUBERNETES)
        .forEach(p -> namespaces.add(p.kubernetes().namespace().orElse("")));
    for (PoolConfig pool : pools.pools()) {
      providers.computeIfAbsent(pool.provider(), kind -> create(kind, context, namespaces));
    }
    return providers;
  }

  /**
   * Start-up checks beyond the YAML: for Slurm pools, that the Slurm commands answer and the
   * partition exists; for Kubernetes pools, that the API server answers and the runtime's
   * account has every permission the provider uses in the pool's namespace. Throws
   * IllegalArgumentException naming the pool's field.
   */
  public static void check(PoolsConfig pools) {
    List<PoolConfig> all = pools.pools();
    io.fabric8.kubernetes.client.KubernetesClient kube = null;
    try {
      for (int i = 0; i < all.size(); i++) {
        PoolConfig pool = all.get(i);
        String label = "pools[" + i + "] (" + pool.name() + ")";
        if (pool.provider() == ProviderKind.SLURM) {
          SlurmProvider.check(pool, label);
        } else if (pool.provider() == ProviderKind.KUBERNETES) {
          if (kube == null) {
            kube = new io.fabric8.kubernetes.client.KubernetesClientBuilder().build();
          }
          String ns = pool.kubernetes().namespace().orElse(
              kube.getNamespace() == null ? "default" : kube.getNamespace());
          KubernetesAccess.check(kube, ns, label);
        }
      }
    } finally {
      if (kube != null) {
        kube.close();
      }
    }
  }
}
