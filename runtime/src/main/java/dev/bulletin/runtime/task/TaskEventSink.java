package dev.bulletin.runtime.task;

import dev.bulletin.protocol.TaskEvent;

/** Where a task's events go: the client session that submitted it. */
public interface TaskEventSink {
  void send(TaskEvent event);

  /** The client session's id, which resident values belong to (issue 29); "" for none. */
  default String sessionId() {
    return "";
  }

  /** One of its calls was sent to this worker: resident values it keeps may be there. */
  default void sentTo(String workerId) {}
}
