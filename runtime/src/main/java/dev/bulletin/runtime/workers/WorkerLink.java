package dev.bulletin.runtime.workers;

import dev.bulletin.runtime.objects.ObjectDirectory;
import dev.bulletin.worker.CallListener;
import dev.bulletin.worker.CallOutcome;
import dev.bulletin.worker.CallRequest;
import dev.bulletin.worker.WorkerAgent;
import dev.bulletin.worker.WorkerStatusView;
import java.util.concurrent.CompletableFuture;

/**
 * How the control plane reaches one worker: the embedded agent in this JVM, or a remote agent
 * over its Attach stream. Either way the function and arguments are objects of the runtime's
 * store; getting them to the worker's host is the link's business.
 */
public interface WorkerLink {

  /** Runs a call; the future never fails: every ending is a {@link CallOutcome}. */
  CompletableFuture<CallOutcome> run(CallRequest request, CallListener listener);

  /** Stops a call (its outcome becomes {@link CallOutcome.Stopped}); unknown ids are ignored. */
  void stop(String taskId, String reason);

  WorkerStatusView status();

  /** The worker's GPU utilisation samples, and each ended call's GPU-seconds busy. */
  default dev.bulletin.worker.GpuUsage usage() {
    return dev.bulletin.worker.GpuUsage.NONE;
  }

  /**
   * Preempts a call: its checkpoint hooks get {@code grace} to run, then it is stopped (its
   * outcome becomes {@link CallOutcome.Stopped}).
   */
  void preempt(String taskId, String reason, java.time.Duration grace);

  /**
   * The runtime stops using this worker (its pool stops it): calls it still runs end as lost.
   * The embedded worker is never detached.
   */
  default void detach(String cause) {}

  /**
   * Asks the worker to upload an object it kept (a call's result) to the runtime's store; the
   * upload itself, or the worker's "unavailable", answers ({@link ObjectDirectory}). Only remote
   * workers keep objects: the embedded one writes into the runtime's store.
   */
  default void sendObject(dev.bulletin.bridge.ObjectKey key) {}

  /** The runtime no longer needs these objects the worker kept: it drops its hold on them. */
  default void dropObjects(String namespace, java.util.List<dev.bulletin.bridge.ObjectKey> keys) {}

  /**
   * A client session of the user whose namespace this is ended or released its resident values
   * ({@link WorkerAgent#dropResident}): the worker drops what that session kept there.
   */
  default void dropResident(String namespace, String session, boolean ended) {}

  /**
   * The values of one of the worker's spill objects now live elsewhere (restored on another
   * worker, or spilled again there): it forgets them ({@link WorkerAgent#forgetSpill}).
   */
  default void forgetSpill(dev.bulletin.bridge.ObjectKey spill, String why) {}

  /**
   * Takes over a call this worker already runs: a runtime restored from its journal adopts it
   * when the worker reattaches (docs/durability.md). Its progress and outcome come back as for
   * {@link #run}. Only a remote worker outlives the runtime; the default says so as the outcome.
   */
  default CompletableFuture<CallOutcome> adopt(String taskId, String namespace,
      CallListener listener) {
    return CompletableFuture.completedFuture(new CallOutcome.WorkerLost("this worker cannot"
        + " hand over a call it ran for an earlier runtime"));
  }

  /** The link to the runtime's own worker agent, which shares the runtime's store. */
  static WorkerLink embedded(WorkerAgent agent) {
    return new WorkerLink() {
      @Override
      public CompletableFuture<CallOutcome> run(CallRequest request, CallListener listener) {
        return agent.run(request, listener);
      }

      @Override
      public void stop(String taskId, String reason) {
        agent.stop(taskId, reason);
      }

      @Override
      public void preempt(String taskId, String reason, java.time.Duration grace) {
        agent.preempt(taskId, reason, grace);
      }

      @Override
      public WorkerStatusView status() {
        return agent.status();
      }

      @Override
      public dev.bulletin.worker.GpuUsage usage() {
        return agent.usage();
      }

      @Override
      public void dropResident(String namespace, String session, boolean ended) {
        agent.dropResident(namespace, session, ended);
      }

      @Override
      public void forgetSpill(dev.bulletin.bridge.ObjectKey spill, String why) {
        agent.forgetSpill(spill, why);
      }
    };
  }
}
