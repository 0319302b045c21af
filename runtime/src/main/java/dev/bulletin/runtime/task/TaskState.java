package dev.bulletin.runtime.task;

import java.util.EnumSet;
import java.util.Set;

/** The life cycle of a call (DESIGN.md, "Task life cycle"), with the moves it allows. */
public enum TaskState {
  QUEUED, PLACED, RUNNING, FINISHED, ERROR, CANCELLED;

  public boolean isTerminal() {
    return this == FINISHED || this == ERROR || this == CANCELLED;
  }

  public Set<TaskState> next() {
    return switch (this) {
      // A queued call fails at once when it can never run, or is cancelled.
      case QUEUED -> EnumSet.of(PLACED, ERROR, CANCELLED);
      // Placed but not started: the executor may fail to start, or the call be cancelled.
      case PLACED -> EnumSet.of(RUNNING, ERROR, CANCELLED);
      case RUNNING -> EnumSet.of(FINISHED, ERROR, CANCELLED);
      case FINISHED, ERROR, CANCELLED -> EnumSet.noneOf(TaskState.class);
    };
  }
}
