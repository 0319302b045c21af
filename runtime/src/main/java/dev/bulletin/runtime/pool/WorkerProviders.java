package dev.bulletin.runtime.pool;

import dev.bulletin.runtime.pool.impl.LocalProvider;
import dev.bulletin.runtime.pool.impl.SlurmProvider;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;

/** Builds providers and checks, at start-up, what only the provider can check. */
public final class WorkerProviders {
  private WorkerProviders() {}

  public static WorkerProvider create(ProviderKind kind, ProviderContext context) {
    return kind == ProviderKind.SLURM ? new SlurmProvider(context) : new LocalProvider(context);
  }

  /** One provider per kind the pools use. */
  public static Map<ProviderKind, WorkerProvider> forPools(PoolsConfig pools, ProviderContext context) {
    Map<ProviderKind, WorkerProvider> providers = new EnumMap<>(ProviderKind.class);
    for (PoolConfig pool : pools.pools()) {
      providers.computeIfAbsent(pool.provider(), kind -> create(kind, context));
    }
    return providers;
  }

  /**
   * Start-up checks beyond the YAML: for Slurm pools, that the Slurm commands answer and the
   * partition exists. Throws IllegalArgumentException naming the pool's field.
   */
  public static void check(PoolsConfig pools) {
    List<PoolConfig> all = pools.pools();
    for (int i = 0; i < all.size(); i++) {
      PoolConfig pool = all.get(i);
      if (pool.provider() == ProviderKind.SLURM) {
        SlurmProvider.check(pool, "pools[" + i + "] (" + pool.name() + ")");
      }
    }
  }
}
