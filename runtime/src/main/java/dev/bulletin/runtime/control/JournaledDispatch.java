package dev.bulletin.runtime.control;

import dev.bulletin.runtime.task.Task;
import io.vertx.core.Context;
import java.util.ArrayList;
import java.util.List;

/**
 * Calls placed in one turn of the control loop, sent to their workers together once the journal
 * holds their new attempts (docs/durability.md): a call the journal did not know had started
 * would run again after a crash under the same attempt number. One wait for the disk per turn,
 * not one per call: a pipelined map places hundreds of calls in a pass, and a wait per call
 * cost a sixth of the pipelined throughput.
 */
final class JournaledDispatch {
  private final Journaling journaling;
  private final Context context;
  private final List<Runnable> waiting = new ArrayList<>();
  private long mark;

  JournaledDispatch(Journaling journaling, Context context) {
    this.journaling = journaling;
    this.context = context;
  }

  /** Journals the call's next attempt on {@code workerId}; {@code send} runs once it is on disk. */
  void dispatch(Task task, String workerId, Runnable send) {
    if (waiting.isEmpty()) {
      mark = journaling.mark();
      context.runOnContext(ignored -> flush()); // after this turn's other placements
    }
    journaling.dispatching(task, workerId);
    waiting.add(send);
  }

  private void flush() {
    List<Runnable> batch = List.copyOf(waiting);
    waiting.clear();
    // A journal that failed (full disk) only risks the attempts' numbers: the calls run.
    journaling.durable(mark).whenComplete((kept, error) ->
        context.runOnContext(ignored -> batch.forEach(Runnable::run)));
  }
}
