package dev.bulletin.runtime.control;

import dev.bulletin.runtime.task.Task;
import dev.bulletin.runtime.task.TaskState;
import dev.bulletin.runtime.task.TaskTable;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * How many calls each user has placed or running, per QoS class: what a class's per-user cap
 * counts ({@link CappedCalls}), and whether any runs preemptible. Kept up to date from the task
 * table's moves, so a pass that refills a few slots need not count the 8,000 calls running on
 * 1,000 workers again; counted
 * anew from the placements at every full window, so a move this missed (a call restored placed
 * after a restart) is set right within one. Owned by the control plane's event loop.
 */
final class UserRunning implements TaskTable.Listener {

  private final Map<String, Map<String, Integer>> running = new HashMap<>();
  /**
   * The placed or running calls that run preemptible (held by identity: a requeue forgets the
   * flag before the move out is heard). Whether there is any decides what a refill pass may
   * leave out, and reading it from 8,000 running calls three times a pass was a third of a
   * refill pass at 1,000 simulated workers.
   */
  private final Set<Task> preemptible = java.util.Collections.newSetFromMap(
      new java.util.IdentityHashMap<>());

  /** The user's calls of {@code qos} placed or running. */
  int of(String user, String qos) {
    Map<String, Integer> own = running.get(user);
    return own == null ? 0 : own.getOrDefault(qos, 0);
  }

  /** Whether any call placed or running runs preemptible. */
  boolean anyPreemptible() {
    return !preemptible.isEmpty();
  }

  /** Counts again from {@code active}, the calls placed or running now. */
  void recount(List<Task> active) {
    running.clear();
    preemptible.clear();
    for (Task task : active) {
      add(task, 1);
      if (task.preemptible()) {
        preemptible.add(task);
      }
    }
  }

  @Override
  public void moved(Task task, TaskState from, TaskState to) {
    boolean was = from == TaskState.PLACED || from == TaskState.RUNNING;
    boolean is = to == TaskState.PLACED || to == TaskState.RUNNING;
    if (is != was) {
      add(task, is ? 1 : -1);
    }
    if (is && task.preemptible()) {
      preemptible.add(task);
    } else if (!is) {
      preemptible.remove(task);
    }
  }

  private void add(Task task, int delta) {
    Map<String, Integer> own = running.computeIfAbsent(task.owner().user(),
        user -> new HashMap<>(4));
    if (own.merge(task.qos(), delta, Integer::sum) <= 0) {
      own.remove(task.qos());
      if (own.isEmpty()) {
        running.remove(task.owner().user());
      }
    }
  }
}
