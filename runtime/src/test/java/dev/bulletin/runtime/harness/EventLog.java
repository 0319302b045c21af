package dev.bulletin.runtime.harness;

import static org.junit.jupiter.api.Assertions.fail;

import dev.bulletin.protocol.ServerMessage;
import dev.bulletin.protocol.TaskEvent;
import dev.bulletin.protocol.TaskState;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Predicate;

/**
 * Every event a session received, in the order the runtime sent them (events of one pass come
 * as one batch, unpacked here in order). Waits end when the event arrives or the stream ends;
 * after {@link RuntimeHarness#PATIENCE} the test fails with what was received.
 */
public final class EventLog {

  private final List<TaskEvent> events = new ArrayList<>();
  /** For each event, the number of the message it came in. */
  private final List<Integer> messages = new ArrayList<>();
  private int messageCount;
  private String sessionId;
  private String streamEnd;

  synchronized void record(ServerMessage message) {
    messageCount++;
    switch (message.getKindCase()) {
      case OPENED -> sessionId = message.getOpened().getSessionId();
      case EVENT -> events.add(message.getEvent());
      case EVENTS -> events.addAll(message.getEvents().getEventsList());
      default -> { }
    }
    while (messages.size() < events.size()) {
      messages.add(messageCount);
    }
    notifyAll();
  }

  /** The messages the session received: a batch of events counts once. */
  synchronized int messageCount() {
    return messageCount;
  }

  synchronized void streamEnded(String how) {
    streamEnd = how;
    notifyAll();
  }

  synchronized String awaitOpened() {
    waitFor(() -> sessionId != null, "the session to open");
    return sessionId;
  }

  /** The first event of the call in this state (waits for it). */
  public TaskEvent await(String taskId, TaskState state) {
    return awaitEvent(taskId, event -> event.getState() == state, "state " + state);
  }

  /** The call's end: finished, error or cancelled (waits for it). */
  public TaskEvent awaitEnd(String taskId) {
    return awaitEvent(taskId, event -> isEnd(event.getState()), "its end");
  }

  public synchronized TaskEvent awaitEvent(String taskId, Predicate<TaskEvent> wanted,
      String what) {
    waitFor(() -> find(taskId, wanted) != null, "call " + taskId + " to reach " + what);
    return find(taskId, wanted);
  }

  /**
   * The call's states in order, each change once: output events (sent while running) and a
   * repeated QUEUED (a new wait reason) do not add a state.
   */
  public synchronized List<TaskState> states(String taskId) {
    List<TaskState> states = new ArrayList<>();
    for (TaskEvent event : events) {
      if (event.getTaskId().equals(taskId)
          && (states.isEmpty() || states.get(states.size() - 1) != event.getState())) {
        states.add(event.getState());
      }
    }
    return states;
  }

  /** Whether the call's first events in these two states came in one message. */
  public synchronized boolean oneMessage(String taskId, TaskState first, TaskState second) {
    return messages.get(position(taskId, first)) == messages.get(position(taskId, second))
        .intValue();
  }

  /** Where the call's first event in this state stands among all of the session's events. */
  public synchronized int position(String taskId, TaskState state) {
    List<Integer> positions = positions(taskId, state);
    if (positions.isEmpty()) {
      throw new AssertionError("call " + taskId + " never reached " + state + "; events: "
          + events);
    }
    return positions.get(0);
  }

  /**
   * Where the call entered this state, each time (a preempted call runs twice), among all of
   * the session's events.
   */
  public synchronized List<Integer> positions(String taskId, TaskState state) {
    List<Integer> positions = new ArrayList<>();
    TaskState previous = null;
    for (int i = 0; i < events.size(); i++) {
      TaskEvent event = events.get(i);
      if (event.getTaskId().equals(taskId)) {
        if (event.getState() == state && previous != state) {
          positions.add(i);
        }
        previous = event.getState();
      }
    }
    return positions;
  }

  public synchronized List<TaskEvent> all() {
    return List.copyOf(events);
  }

  private TaskEvent find(String taskId, Predicate<TaskEvent> wanted) {
    for (TaskEvent event : events) {
      if (event.getTaskId().equals(taskId) && wanted.test(event)) {
        return event;
      }
    }
    return null;
  }

  private static boolean isEnd(TaskState state) {
    return state == TaskState.FINISHED || state == TaskState.ERROR
        || state == TaskState.CANCELLED;
  }

  /** Waits on this log's monitor; the caller holds it. */
  private void waitFor(java.util.function.BooleanSupplier done, String what) {
    long deadline = System.nanoTime() + RuntimeHarness.PATIENCE.toNanos();
    while (!done.getAsBoolean()) {
      if (streamEnd != null) {
        fail("the session stream ended (" + streamEnd + ") while waiting for " + what
            + "; events: " + events);
      }
      long left = deadline - System.nanoTime();
      if (left <= 0) {
        fail("waited " + RuntimeHarness.PATIENCE + " for " + what + "; events: " + events);
      }
      try {
        wait(Math.max(1, left / 1_000_000));
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        fail("interrupted while waiting for " + what);
      }
    }
  }
}
