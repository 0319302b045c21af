package dev.bulletin.worker;

import dev.bulletin.bridge.ObjectStore;
import java.util.concurrent.CompletableFuture;

/**
 * Runs calls in warm Python executors on one host. The agent does not decide what runs where:
 * the runtime's scheduler reserves slots and hands the agent calls with their GPUs.
 */
public interface WorkerAgent extends AutoCloseable {

  WorkerOptions options();

  /** The host's object store; a call's function and arguments must be in it. */
  ObjectStore store();

  /** Starts the warm executors; completes when they are ready. */
  CompletableFuture<Void> start();

  /** Runs a call; the future never fails: every ending is a {@link CallOutcome}. */
  CompletableFuture<CallOutcome> run(CallRequest request, CallListener listener);

  /**
   * Stops a call: a running one by killing its executor (which is replaced). The call's outcome
   * becomes {@link CallOutcome.Stopped} with the reason. Unknown ids are ignored.
   */
  void stop(String taskId, String reason);

  /**
   * Preempts a running call: its executor gets SIGUSR1 (the call's {@code bulletin.on_preempt}
   * hooks run, e.g. to save a checkpoint), and it is stopped as by {@link #stop} as soon as they
   * have returned (at once if it registered none), or after {@code grace} at the latest, unless
   * the call has ended by then. A call not running yet is stopped at once.
   */
  void preempt(String taskId, String reason, java.time.Duration grace);

  WorkerStatusView status();

  /** The GPUs' utilisation samples and each call's GPU-seconds busy. */
  default GpuUsage usage() {
    return GpuUsage.NONE;
  }

  /**
   * A client session of the user whose object namespace is {@code namespace} ended, or released
   * its resident values: what it kept (issue 29) goes, from the spills and from that user's live
   * executors, in the background. No other user's values are touched.
   *
   * @param ended the session ended (a spill that races this drops its values too); false: it
   *     released its values and goes on, and what it keeps later stays
   */
  default void dropResident(String namespace, String session, boolean ended) {}

  /** Who is told of this agent's spill objects from now on ({@link SpillListener}). */
  default void onSpills(SpillListener listener) {}

  /**
   * The values of {@code spill} (a spill object of this agent's, in its user's namespace) were
   * restored on another worker, or superseded there: its handles are forgotten here (a call
   * that names one here is told {@code why}) and the agent's hold on it goes.
   */
  default void forgetSpill(dev.bulletin.bridge.ObjectKey spill, String why) {}

  /** Stops every executor. */
  @Override
  void close();
}
