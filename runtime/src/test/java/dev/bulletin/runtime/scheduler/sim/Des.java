package dev.bulletin.runtime.scheduler.sim;

import java.util.PriorityQueue;

/** A discrete-event loop over a {@link SimClock}: events run in time order, ties in FIFO order. */
final class Des {
  final SimClock clock;
  private final PriorityQueue<Event> events = new PriorityQueue<>();
  private long seq;

  private record Event(long at, long seq, Runnable action) implements Comparable<Event> {
    @Override
    public int compareTo(Event other) {
      return at != other.at ? Long.compare(at, other.at) : Long.compare(seq, other.seq);
    }
  }

  Des(long startMillis) {
    this.clock = new SimClock(startMillis);
  }

  long now() {
    return clock.millis();
  }

  void at(long millis, Runnable action) {
    events.add(new Event(Math.max(millis, clock.millis()), seq++, action));
  }

  void after(double seconds, Runnable action) {
    at(clock.millis() + Math.round(seconds * 1000), action);
  }

  /** Runs events until none is left or the next is after {@code untilMillis}. */
  void run(long untilMillis) {
    while (!events.isEmpty() && events.peek().at() <= untilMillis) {
      Event event = events.poll();
      clock.set(event.at());
      event.action().run();
    }
  }

  boolean idle() {
    return events.isEmpty();
  }
}
