package dev.bulletin.protocol;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Executor;
import java.util.function.BiConsumer;
import java.util.function.Consumer;
import java.util.function.Function;

/**
 * Messages for one stream that leave together: those added while the sender's event loop works
 * on one turn go out as one message (a {@link HeadBatch} or {@link WorkerBatch}) once the work
 * queued before it is done, so a lone message waits for nothing and a burst costs one write
 * (one gRPC frame and one flush, where each message was one: issue 30). Used on one event loop
 * only; the runtime's side of an Attach stream and the worker's each have one.
 *
 * @param <M> the stream's message type
 */
public final class ReadyBatch<M> {
  private final Executor afterTurn;
  private final Function<List<M>, M> batchOf;
  private final Consumer<M> write;
  private final BiConsumer<List<M>, RuntimeException> failed;
  private List<M> ready = new ArrayList<>();

  /**
   * @param afterTurn runs a task on the sender's event loop after what is queued there now
   *     (Vert.x: {@code context::runOnContext})
   * @param batchOf the one message that carries several, in order
   * @param write writes one message to the stream; may throw when the stream is gone
   * @param failed told the messages of a write that threw, and what it threw
   */
  public ReadyBatch(Executor afterTurn, Function<List<M>, M> batchOf, Consumer<M> write,
      BiConsumer<List<M>, RuntimeException> failed) {
    this.afterTurn = afterTurn;
    this.batchOf = batchOf;
    this.write = write;
    this.failed = failed;
  }

  /** Queues a message: it leaves with the others of this turn. */
  public void add(M message) {
    ready.add(message);
    if (ready.size() == 1) {
      afterTurn.execute(this::flush);
    }
  }

  /** Messages queued and not yet written. */
  public int size() {
    return ready.size();
  }

  /** Takes the queued messages back unwritten (the stream they were for went away). */
  public List<M> drain() {
    List<M> taken = ready;
    ready = new ArrayList<>();
    return taken;
  }

  /** Writes what is queued now: alone if it is one message, else as one batch. */
  public void flush() {
    if (ready.isEmpty()) {
      return;
    }
    List<M> out = drain();
    try {
      write.accept(out.size() == 1 ? out.get(0) : batchOf.apply(out));
    } catch (RuntimeException broken) {
      failed.accept(out, broken);
    }
  }
}
