package dev.bulletin.runtime.control;

import dev.bulletin.runtime.task.Task;
import io.vertx.core.Context;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * Calls placed in one turn of the control loop, sent to their workers together once the journal
 * holds their new attempts (docs/durability.md): a call the journal did not know had started
 * would run again after a crash under the same attempt number. One wait for the journal per
 * turn, not one per call: a pipelined map places hundreds of calls in a pass.
 *
 * <p>How far the journal must have the attempt depends on what outlives what. The embedded
 * worker's executors die with the runtime's machine, so a call sent there needs its attempt
 * <em>written</em> (in the kernel's cache, in order after the call's acceptance): a crash of
 * the runtime's process keeps it, and a power loss takes the running call down too. Only a
 * power loss within one group commit can then rerun such a call under the same attempt number
 * (the case docs/durability.md gives up). A remote worker outlives a power loss of the head, so
 * a call sent there waits until its attempt is <em>durable</em> (synced).
 */
final class JournaledDispatch {
  private final Journaling journaling;
  private final Context context;
  private final List<Runnable> toEmbedded = new ArrayList<>();
  private final List<Runnable> toRemote = new ArrayList<>();
  private long mark;

  JournaledDispatch(Journaling journaling, Context context) {
    this.journaling = journaling;
    this.context = context;
  }

  /**
   * Journals the call's next attempt on {@code workerId}; {@code send} runs once the journal
   * holds it (written for the embedded worker, synced for a remote one).
   */
  void dispatch(Task task, String workerId, boolean remote, Runnable send) {
    if (toEmbedded.isEmpty() && toRemote.isEmpty()) {
      mark = journaling.mark();
      context.runOnContext(ignored -> flush()); // after this turn's other placements
    }
    journaling.dispatching(task, workerId);
    (remote ? toRemote : toEmbedded).add(send);
  }

  private void flush() {
    if (!toEmbedded.isEmpty()) {
      List<Runnable> batch = List.copyOf(toEmbedded);
      toEmbedded.clear();
      whenKept(journaling.written(mark), batch);
    }
    if (!toRemote.isEmpty()) {
      List<Runnable> batch = List.copyOf(toRemote);
      toRemote.clear();
      whenKept(journaling.durable(mark), batch);
    }
  }

  private void whenKept(CompletableFuture<Void> kept, List<Runnable> batch) {
    if (kept.isDone()) {
      batch.forEach(Runnable::run); // written on this thread just now: no hop back
      return;
    }
    // A journal that failed (full disk) only risks the attempts' numbers: the calls run.
    kept.whenComplete((ignored, error) ->
        context.runOnContext(v -> batch.forEach(Runnable::run)));
  }
}
