package dev.bulletin.runtime.pool;

/**
 * A worker a provider started, as the provider finds it again.
 *
 * @param provider the provider that started it
 * @param pool the pool it was launched for
 * @param workerId the id given at launch ({@code --worker-id}); the worker registers with it
 * @param providerId the provider's own id: the Slurm job id, the local process id, the Pod's
 *     namespace/name
 */
public record WorkerHandle(ProviderKind provider, String pool, String workerId, String providerId) {
  public WorkerHandle {
    if (provider == null || pool == null || workerId == null || providerId == null) {
      throw new IllegalArgumentException("a worker handle needs provider, pool, workerId and providerId");
    }
  }

  @Override
  public String toString() {
    String kind = switch (provider) {
      case SLURM -> "Slurm job ";
      case KUBERNETES -> "Pod ";
      case LOCAL -> "pid ";
    };
    return workerId + " (" + kind + providerId + ")";
  }
}
