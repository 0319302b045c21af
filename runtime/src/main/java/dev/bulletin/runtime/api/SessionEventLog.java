package dev.bulletin.runtime.api;

import dev.bulletin.protocol.TaskEvent;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;

/**
 * The events of one session, numbered from 1, kept until the client says it has seen them
 * ({@code SessionAck}, or the seq a resume names): a stream that breaks loses nothing the
 * client has not seen. Bounded in count and bytes: past the bound the oldest go, and a resume
 * that would need one of them is refused (its client cannot get every event any more). Used on
 * the control plane's loop only.
 */
final class SessionEventLog {
  static final int MAX_EVENTS = 100_000;
  static final long MAX_BYTES = 64L << 20;

  private record Kept(long seq, TaskEvent event, int bytes) {}

  private final ArrayDeque<Kept> kept = new ArrayDeque<>();
  private long lastSeq;
  private long bytes;
  /** Events up to this seq are gone without the client having acknowledged them. */
  private long droppedThrough;

  SessionEventLog(long lastSeq) {
    this.lastSeq = lastSeq;
  }

  /** Numbers and keeps an event; returns its seq. */
  long add(TaskEvent event) {
    int size = event.getSerializedSize();
    kept.addLast(new Kept(++lastSeq, event, size));
    bytes += size;
    while (kept.size() > MAX_EVENTS || bytes > MAX_BYTES) {
      Kept dropped = kept.removeFirst();
      bytes -= dropped.bytes();
      droppedThrough = dropped.seq();
    }
    return lastSeq;
  }

  /** The client has seen every event up to seq. */
  void acknowledge(long seq) {
    while (!kept.isEmpty() && kept.peekFirst().seq() <= seq) {
      bytes -= kept.removeFirst().bytes();
    }
  }

  long lastSeq() {
    return lastSeq;
  }

  /** Whether a client that saw up to seq can still get every later event. */
  boolean canReplayAfter(long seq) {
    return seq >= droppedThrough;
  }

  /**
   * The client saw events up to seq, more than this log numbered: a session restored after a
   * restart (its events were not journaled). Numbering goes on after the client's.
   */
  void catchUp(long seq) {
    if (seq > lastSeq) {
      acknowledge(lastSeq);
      lastSeq = seq;
    }
  }

  /** The kept events after seq, in order. */
  List<TaskEvent> after(long seq) {
    List<TaskEvent> events = new ArrayList<>();
    for (Kept k : kept) {
      if (k.seq() > seq) {
        events.add(k.event());
      }
    }
    return events;
  }

  int size() {
    return kept.size();
  }
}
