package dev.bulletin.runtime.task;

import dev.bulletin.protocol.TaskEvent;

/** Where a task's events go: the client session that submitted it. */
public interface TaskEventSink {
  void send(TaskEvent event);
}
