package dev.bulletin.runtime.control;

import dev.bulletin.runtime.task.Task;
import dev.bulletin.runtime.workers.AttachedWorker;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The calls placed or running, and the worker each holds slots on. The calls are also kept in a
 * list of their own, because every scheduling pass reads all of them: with 8,000 running on
 * 1,000 workers, walking the map and looking each task up again was a twentieth of the event
 * loop (make bench-scale, JFR). Owned by the control plane's event loop.
 */
final class PlacedCalls {

  /** Where one call holds slots, and where it sits in {@link #calls}. */
  private static final class Held {
    final Task task;
    AttachedWorker worker;
    int slot;

    Held(Task task, AttachedWorker worker, int slot) {
      this.task = task;
      this.worker = worker;
      this.slot = slot;
    }
  }

  private final Map<String, Held> byId = new HashMap<>();
  private final List<Held> calls = new ArrayList<>();
  /** {@link #calls}' tasks, slot for slot: copied whole for a pass without reading each call. */
  private final List<Task> tasks = new ArrayList<>();

  /** Notes that {@code task} holds slots on {@code worker} (again: on this worker now). */
  void put(Task task, AttachedWorker worker) {
    Held held = byId.get(task.id());
    if (held != null && held.task == task) {
      held.worker = worker;
      return;
    }
    if (held != null) {
      remove(task.id());
    }
    held = new Held(task, worker, calls.size());
    byId.put(task.id(), held);
    calls.add(held);
    tasks.add(task);
  }

  /** The worker the call holds slots on, or null. */
  AttachedWorker worker(String taskId) {
    Held held = byId.get(taskId);
    return held == null ? null : held.worker;
  }

  /** Forgets the call; @return the worker it held slots on, or null. */
  AttachedWorker remove(String taskId) {
    Held held = byId.remove(taskId);
    if (held == null) {
      return null;
    }
    // The last call takes the removed one's place: no pass depends on the list's order.
    Held last = calls.remove(calls.size() - 1);
    tasks.remove(tasks.size() - 1);
    if (last != held) {
      last.slot = held.slot;
      calls.set(held.slot, last);
      tasks.set(held.slot, last.task);
    }
    return held.worker;
  }

  /** The placed or running calls, in a list of their own. */
  List<Task> tasks() {
    return new ArrayList<>(tasks);
  }

  /** Their ids, in a set of their own. */
  Set<String> ids() {
    return Set.copyOf(byId.keySet());
  }
}
