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
      // Back to QUEUED when its worker is lost (or it is preempted) and it may run again.
      case PLACED -> EnumSet.of(RUNNING, ERROR, CANCELLED, QUEUED);
      case RUNNING -> EnumSet.of(FINISHED, ERROR, CANCELLED, QUEUED);
      case FINISHED, ERROR, CANCELLED -> EnumSet.noneOf(TaskState.class);
    };
  }
}
