package dev.bulletin.runtime.pool;

import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;

/**
 * Starts and stops workers for pools. Small on purpose: local processes, Slurm jobs and
 * Kubernetes Pods fit the same three calls. Asynchronous because the tools behind it block ({@code sbatch},
 * {@code scancel}); futures complete on the provider's own threads, never on a caller's event loop.
 * Failures complete the future exceptionally with a {@link ProviderException} saying what the
 * provider said.
 */
public interface WorkerProvider extends AutoCloseable {

  ProviderKind kind();

  /**
   * Starts one worker of the pool that registers as {@code workerId}. Completes once the provider
   * accepted it (the process runs, the job is queued), not when the worker registers.
   */
  CompletableFuture<WorkerHandle> launch(PoolConfig pool, String workerId);

  /** Stops the worker (SIGTERM, then SIGKILL after a grace; scancel). A gone worker is no error. */
  CompletableFuture<Void> terminate(WorkerHandle handle);

  /**
   * This cluster's workers that still exist at the provider, of every pool, so that a restarted
   * runtime adopts them instead of leaking or duplicating them.
   */
  CompletableFuture<List<ProvidedWorker>> list();

  /**
   * Why the provider ended this worker, or saw it end, when it knows (a Pod evicted, or deleted
   * after waiting too long for a node); asked once, when the autoscaler finds the worker gone.
   */
  default Optional<String> whyGone(WorkerHandle handle) {
    return Optional.empty();
  }

  /** Why the pool's workers wait to start now, in the provider's words, if they do. */
  default Optional<String> waiting(String pool) {
    return Optional.empty();
  }

  /** Releases the provider's threads; workers keep running (a restarted runtime adopts them). */
  @Override
  void close();
}
