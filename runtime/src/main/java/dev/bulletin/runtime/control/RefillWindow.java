package dev.bulletin.runtime.control;

import dev.bulletin.runtime.scheduler.policy.PolicyConfig;
import dev.bulletin.runtime.task.Task;
import dev.bulletin.runtime.task.TaskState;
import dev.bulletin.runtime.task.TaskTable;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * Which queued calls a pass looks at ({@link Passes} decides when a pass is full). A full pass
 * looks at every user's window; a pass that refills freed slots looks only at users who may
 * start a call, cuts one user's alike calls to the first few ({@link SmallWindow}) and leaves
 * out what their QoS class's cap keeps from starting ({@link CappedCalls}). Owned by the
 * control plane's event loop.
 */
final class RefillWindow {

  /**
   * What a pass considers.
   *
   * @param leftOut calls that wait (users at their cap) were left out: the pass's positions
   *     are not the full window's, so it tells no waiting call
   * @param behind queued calls not considered that may start: another pass is worth it when
   *     this one placed all it looked at
   */
  record Choice(List<Task> considered, boolean leftOut, int behind) {}

  private final TaskTable tasks;
  private final PolicyConfig policy;
  /**
   * Users who may have a call that can start: every user with queued calls after a full
   * window; a refill pass leaves out those whose calls it found all at their class's cap, and
   * any change to one of a user's calls but a start brings them back (a call queued, placed,
   * ended or requeued changes what they run or have queued). So a refill pass over 2,000 users
   * at their cap looks at the few whose calls ended.
   */
  private final Set<String> mayStart = new HashSet<>();
  private final UserRunning running = new UserRunning();

  RefillWindow(TaskTable tasks, PolicyConfig policy) {
    this.tasks = tasks;
    this.policy = policy;
    tasks.listen(running);
    tasks.listen(new TaskTable.Listener() {
      @Override
      public void moved(Task task, TaskState from, TaskState to) {
        if (!(from == TaskState.PLACED && to == TaskState.RUNNING)) {
          mayStart.add(task.owner().user());
        }
      }
    });
  }

  /**
   * The calls a pass starts from: every user's first {@code perUser} when {@code full}, else
   * only those of users who may start one (empty: nothing to do, and no running call to read).
   */
  List<Task> window(boolean full, int perUser) {
    return full ? tasks.window(perUser) : tasks.window(perUser, mayStart::contains);
  }

  /**
   * What a pass over {@code window} considers; {@code active}: the calls placed or running.
   * A full window is considered whole, and sets the users who may start and their counts anew.
   */
  Choice choose(List<Task> window, boolean full, List<Task> active, int perUser,
      int smallSize) {
    if (full) {
      mayStart.clear();
      mayStart.addAll(tasks.queuedUsers());
      running.recount(active);
      return new Choice(window, false, tasks.queuedView().size() - window.size());
    }
    boolean leftOut = false;
    for (String user : tasks.queuedUsers()) {
      if (!mayStart.contains(user)) {
        leftOut = true; // a user at their cap: not looked at
        break;
      }
    }
    List<Task> considered = SmallWindow.of(window, active, smallSize);
    int behind = window.size() - considered.size(); // one user's calls after their first few
    Set<String> cut = Set.of();
    if (considered == window) {
      CappedCalls.Thinned thinned = CappedCalls.without(window, active, running, policy);
      considered = thinned.calls();
      leftOut |= considered != window;
      mayStart.removeAll(thinned.atCap());
      cut = thinned.cut();
    }
    for (String user : mayStart) {
      if (!cut.contains(user)) { // a larger window would find a cut user's calls capped too
        behind += Math.max(0, tasks.queuedCount(user) - perUser);
      }
    }
    return new Choice(considered, leftOut, behind);
  }
}
