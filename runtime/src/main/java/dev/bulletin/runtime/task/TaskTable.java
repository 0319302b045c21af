package dev.bulletin.runtime.task;

import dev.bulletin.protocol.TaskEvent;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * Every call the runtime knows, and the one place their state changes: each change is checked
 * against the life cycle and announced to the task's session. (The journal hooks in here.)
 * Not thread-safe: owned by the control plane's event loop.
 */
public final class TaskTable {
  private final Map<String, Task> tasks = new HashMap<>();
  /** Queued tasks in arrival order, kept apart so a scheduling pass does not walk running ones. */
  private final Map<String, Task> queue = new LinkedHashMap<>();

  /** Adds a new, queued task. @return false if a task with this id is already known */
  public boolean add(Task task) {
    if (tasks.putIfAbsent(task.id(), task) != null) {
      return false;
    }
    queue.put(task.id(), task);
    return true;
  }

  public Optional<Task> get(String id) {
    return Optional.ofNullable(tasks.get(id));
  }

  /** The queue itself, oldest first: read-only, and not to be held across transitions. */
  public Collection<Task> queuedView() {
    return java.util.Collections.unmodifiableCollection(queue.values());
  }

  /** A copy of the queue, oldest first. */
  public List<Task> queued() {
    return new ArrayList<>(queue.values());
  }

  public Collection<Task> all() {
    return List.copyOf(tasks.values());
  }

  /**
   * Moves a task to {@code to} and sends {@code event} (whose state must be {@code to}) to its
   * session. A terminal task leaves the table.
   *
   * @throws IllegalStateException if the life cycle does not allow the move
   */
  public void transition(Task task, TaskState to, TaskEvent event) {
    move(task, to);
    task.sink().send(event);
  }

  private void move(Task task, TaskState to) {
    if (!task.state.next().contains(to)) {
      throw new IllegalStateException("task " + task.id() + " cannot go from " + task.state
          + " to " + to);
    }
    if (task.state == TaskState.QUEUED) {
      queue.remove(task.id());
    } else if (to == TaskState.QUEUED) {
      queue.put(task.id(), task); // requeued: it waits behind the calls already queued
    }
    task.state = to;
    if (to.isTerminal()) {
      tasks.remove(task.id());
    }
  }

  /**
   * Moves a task to {@code to} without telling its session: for steps the client does not see
   * on their own (a placement is announced with the call's start).
   */
  public void transitionQuietly(Task task, TaskState to) {
    move(task, to);
  }

  /** Sends an event that does not change state (output). */
  public void announce(Task task, TaskEvent event) {
    task.sink().send(event);
  }
}
