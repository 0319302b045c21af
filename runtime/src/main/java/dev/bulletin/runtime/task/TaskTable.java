package dev.bulletin.runtime.task;

import dev.bulletin.protocol.TaskEvent;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.Predicate;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * Every call the runtime knows, and the one place their state changes: each change is checked
 * against the life cycle and announced to the task's session. (The journal hooks in here.)
 * Not thread-safe: owned by the control plane's event loop.
 */
public final class TaskTable {
  private static final Logger CALLS = Logger.getLogger(dev.bulletin.protocol.LogSetup.CALLS);
  private final Map<String, Task> tasks = new HashMap<>();
  /** Queued tasks in arrival order, kept apart so a scheduling pass does not walk running ones. */
  private final Map<String, Task> queue = new LinkedHashMap<>();
  /**
   * The same queue by user, and the queued tasks that may pass the others: a scheduling pass
   * reads each user's first few and those, never the whole queue (thousands when a client
   * pipelines).
   */
  private final Map<String, LinkedHashMap<String, Task>> queueByUser = new HashMap<>();
  private final Map<String, Task> queuedAhead = new LinkedHashMap<>();
  private final Predicate<Task> goesAhead;
  private final java.util.List<Listener> listeners = new java.util.ArrayList<>();

  /**
   * Hears the table's tasks change, on the table's event loop, after the change: the metrics
   * (every state), the journal (what the session was told) and the usage ledger (each end).
   */
  public interface Listener {
    /** The task moved from {@code from} (null: it was just added, queued) to {@code to}. */
    default void moved(Task task, TaskState from, TaskState to) { }

    /** The task moved to {@code to}; {@code event} went to its session (null: quietly). */
    default void told(Task task, TaskState to, TaskEvent event) { }

    /** An event that changes no state (output) went to the task's session. */
    default void announced(Task task) { }

    /** The task ended; {@code event} is the last its session was told. */
    default void ended(Task task, TaskEvent event) { }
  }

  /** Adds a listener of every task's changes. */
  public void listen(Listener listener) {
    listeners.add(java.util.Objects.requireNonNull(listener, "listener"));
  }

  /** A table in which no call passes the others' queue positions. */
  public TaskTable() {
    this(task -> false);
  }

  /** @param goesAhead calls a pass considers wherever they are in the queue */
  public TaskTable(Predicate<Task> goesAhead) {
    this.goesAhead = goesAhead;
  }

  /** Adds a new, queued task. @return false if a task with this id is already known */
  public boolean add(Task task) {
    if (tasks.putIfAbsent(task.id(), task) != null) {
      return false;
    }
    enqueue(task);
    for (Listener listener : listeners) {
      listener.moved(task, null, TaskState.QUEUED);
    }
    return true;
  }

  public Optional<Task> get(String id) {
    return Optional.ofNullable(tasks.get(id));
  }

  /** The queue itself, oldest first: read-only, and not to be held across transitions. */
  public Collection<Task> queuedView() {
    return java.util.Collections.unmodifiableCollection(queue.values());
  }

  /**
   * The calls a scheduling pass considers: each user's first {@code perUser} queued calls, and
   * every queued call that goes ahead. In no particular order (the policy orders them).
   */
  public List<Task> window(int perUser) {
    return window(perUser, user -> true);
  }

  /**
   * As {@link #window(int)}, with only the calls of users {@code included} accepts, in the same
   * order: a subsequence of the whole window.
   */
  public List<Task> window(int perUser, Predicate<String> included) {
    if (queue.size() <= perUser) {
      List<Task> all = new ArrayList<>(queue.size());
      for (Task task : queue.values()) {
        if (included.test(task.owner().user())) {
          all.add(task);
        }
      }
      return all;
    }
    List<Task> window = new ArrayList<>();
    for (Map.Entry<String, LinkedHashMap<String, Task>> own : queueByUser.entrySet()) {
      if (!included.test(own.getKey())) {
        continue;
      }
      int taken = 0;
      for (Task task : own.getValue().values()) {
        if (taken++ == perUser) {
          break;
        }
        window.add(task);
      }
    }
    for (Task task : queuedAhead.values()) {
      LinkedHashMap<String, Task> own = queueByUser.get(task.owner().user());
      if (own.size() > perUser && included.test(task.owner().user())
          && !firstOf(own, perUser, task)) {
        window.add(task);
      }
    }
    return window;
  }

  /** Adds {@code user}'s first {@code count} queued calls, oldest first, to {@code into}. */
  public void firstQueued(String user, int count, List<Task> into) {
    LinkedHashMap<String, Task> own = queueByUser.get(user);
    if (own == null) {
      return;
    }
    int taken = 0;
    for (Task task : own.values()) {
      if (taken++ == count) {
        return;
      }
      into.add(task);
    }
  }

  /** How many calls {@code user} has queued. */
  public int queuedCount(String user) {
    LinkedHashMap<String, Task> own = queueByUser.get(user);
    return own == null ? 0 : own.size();
  }

  /** The users with queued calls. */
  public java.util.Set<String> queuedUsers() {
    return java.util.Collections.unmodifiableSet(queueByUser.keySet());
  }

  private static boolean firstOf(LinkedHashMap<String, Task> own, int count, Task task) {
    int seen = 0;
    for (Task candidate : own.values()) {
      if (seen++ == count) {
        return false;
      }
      if (candidate == task) {
        return true;
      }
    }
    return false;
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
    if (task.attempts() > 0 && (to == TaskState.RUNNING || to.isTerminal())) {
      event = event.toBuilder().setAttempt(task.attempts()).build();
    }
    task.sink().send(event);
    for (Listener listener : listeners) {
      listener.told(task, to, event);
      if (to.isTerminal()) {
        listener.ended(task, event);
      }
    }
  }

  private void move(Task task, TaskState to) {
    if (!task.state.next().contains(to)) {
      throw new IllegalStateException("task " + task.id() + " cannot go from " + task.state
          + " to " + to);
    }
    // For the operator (LogSetup): how each call ended, and each requeue, at INFO; the steps in
    // between only at FINE, as three lines per call cost a busy runtime more than its scheduler.
    Level level = to.isTerminal() || to == TaskState.QUEUED ? Level.INFO : Level.FINE;
    if (CALLS.isLoggable(level)) {
      CALLS.log(level, "call " + task.id() + " (" + task.name() + " of " + task.owner().user() + ") "
          + task.state + " -> " + to + (task.workerId() != null && to != TaskState.QUEUED
              ? " on " + task.workerId() : "")
          + (task.stopReason() != null && to.isTerminal() ? ": " + task.stopReason().describe()
              : ""));
    }
    if (task.state == TaskState.QUEUED) {
      dequeue(task);
    } else if (to == TaskState.QUEUED) {
      enqueue(task); // requeued: it waits behind the calls already queued
    }
    TaskState from = task.state;
    task.state = to;
    if (to.isTerminal()) {
      tasks.remove(task.id());
    }
    for (Listener listener : listeners) {
      listener.moved(task, from, to);
    }
  }

  /**
   * Moves a task to {@code to} without telling its session: for steps the client does not see
   * on their own (a placement is announced with the call's start).
   */
  public void transitionQuietly(Task task, TaskState to) {
    move(task, to);
    for (Listener listener : listeners) {
      listener.told(task, to, null);
    }
  }

  private void enqueue(Task task) {
    queue.put(task.id(), task);
    queueByUser.computeIfAbsent(task.owner().user(), user -> new LinkedHashMap<>())
        .put(task.id(), task);
    if (goesAhead.test(task)) {
      queuedAhead.put(task.id(), task);
    }
  }

  private void dequeue(Task task) {
    queue.remove(task.id());
    queueByUser.computeIfPresent(task.owner().user(), (user, own) -> {
      own.remove(task.id());
      return own.isEmpty() ? null : own;
    });
    queuedAhead.remove(task.id());
  }

  /** Sends an event that does not change state (output). */
  public void announce(Task task, TaskEvent event) {
    task.sink().send(event);
    for (Listener listener : listeners) {
      listener.announced(task);
    }
  }
}
