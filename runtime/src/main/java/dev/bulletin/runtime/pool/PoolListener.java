package dev.bulletin.runtime.pool;

/**
 * What the autoscaler asks of the runtime. Called on the owner's thread (the one that calls
 * {@link Autoscaler#tick}).
 */
public interface PoolListener {

  /** Place no new call on this worker; its running calls finish. */
  void drain(String workerId, String reason);

  /**
   * This worker's allocation is being stopped (or is gone): forget the worker and requeue or fail
   * the calls it still runs (normally none).
   */
  void stopping(String workerId, String reason);

  /** Something worth a log line happened. */
  void event(PoolEvent event);

  /**
   * A pool worker was launched, or adopted after a restart: the runtime journals its handle, so
   * that the next runtime adopts or cancels it instead of leaking or launching it twice.
   */
  default void launched(WorkerHandle handle) { }

  /** A pool worker ended (stopped, or found gone): the journal forgets it. */
  default void ended(WorkerHandle handle) { }
}
