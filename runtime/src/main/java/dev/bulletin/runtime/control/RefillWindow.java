package dev.bulletin.runtime.control;

import dev.bulletin.runtime.scheduler.policy.PolicyConfig;
import dev.bulletin.runtime.scheduler.policy.QosClass;
import dev.bulletin.runtime.task.Task;
import dev.bulletin.runtime.task.TaskState;
import dev.bulletin.runtime.task.TaskTable;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.function.Supplier;

/**
 * Which queued calls a pass looks at ({@link Passes} decides when a pass is full). A full pass
 * looks at every user's window; a pass that refills freed slots looks only at users who may
 * start a call, cuts one user's alike calls to the first few ({@link SmallWindow}) and leaves
 * out what their QoS class's cap keeps from starting ({@link CappedCalls}), for a user whose
 * queue is all of one shape without reading their calls ({@link QueuedShapes}). Owned by the
 * control plane's event loop.
 */
final class RefillWindow {

  /**
   * What a pass considers.
   *
   * @param active the calls placed or running (null when nothing is considered: not read)
   * @param leftOut calls that wait (users at their cap) were left out: the pass's positions
   *     are not the full window's, so it tells no waiting call
   * @param behind queued calls not considered that may start: another pass is worth it when
   *     this one placed all it looked at
   * @param whole every call of the window read is considered (none cut to the first few)
   */
  record Choice(List<Task> considered, List<Task> active, boolean leftOut, int behind,
      boolean whole) {}

  private static final Choice NOTHING = new Choice(List.of(), null, true, 0, false);

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
  private final QueuedShapes shapes;

  RefillWindow(TaskTable tasks, PolicyConfig policy) {
    this.tasks = tasks;
    this.policy = policy;
    this.shapes = new QueuedShapes(policy);
    tasks.listen(running);
    tasks.listen(shapes);
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
   * What a pass considers: every user's first {@code perUser} calls when {@code full} (which
   * sets the users who may start and their counts anew), else only what users who may start
   * one could start. {@code active} gives the calls placed or running, read only when needed.
   */
  Choice choose(boolean full, int perUser, int smallSize, Supplier<List<Task>> active) {
    if (full) {
      List<Task> window = tasks.window(perUser);
      List<Task> placed = active.get();
      mayStart.clear();
      mayStart.addAll(tasks.queuedUsers());
      running.recount(placed);
      return new Choice(window, placed, false, tasks.queuedView().size() - window.size(), true);
    }
    return refill(perUser, smallSize, active);
  }

  private Choice refill(int perUser, int smallSize, Supplier<List<Task>> activeCalls) {
    // Users the census decides: all at their cap (left out, and not looked at again until one
    // of their calls moves), or all alike with r more allowed (their first r, as CappedCalls
    // would keep). The rest go the long way, their windows read call by call.
    List<Task> quick = new ArrayList<>();
    Set<String> quickCut = new HashSet<>();
    Set<String> slow = new HashSet<>();
    boolean leftOut = false;
    boolean preemptibleRuns = running.anyPreemptible();
    for (String user : List.copyOf(mayStart)) {
      if (tasks.queuedCount(user) == 0) {
        mayStart.remove(user); // nothing to start; a call queued brings them back
        continue;
      }
      if (shapes.allAtCap(user, qos -> CappedCalls.left(user, qos, running, policy))) {
        mayStart.remove(user);
        leftOut = true;
        continue;
      }
      String qos = shapes.uniformClass(user);
      int more = qos == null ? QosClass.UNLIMITED : CappedCalls.left(user, qos, running, policy);
      // With preemptible work running the cap's "only the first r" does not hold (CappedCalls).
      if (more != QosClass.UNLIMITED && more < perUser && !preemptibleRuns) {
        tasks.firstQueued(user, more, quick);
        if (tasks.queuedCount(user) > more) {
          quickCut.add(user);
          leftOut = true;
        }
        continue;
      }
      slow.add(user);
    }
    List<Task> window = slow.isEmpty() ? new ArrayList<>() : tasks.window(perUser, slow::contains);
    int slowCalls = window.size();
    window.addAll(quick);
    if (window.isEmpty()) {
      return NOTHING; // every user who waits is at their cap: an end or the full window comes next
    }
    List<Task> active = activeCalls.get();
    for (String user : tasks.queuedUsers()) {
      if (!mayStart.contains(user)) {
        leftOut = true; // a user at their cap: not looked at
        break;
      }
    }
    List<Task> considered = SmallWindow.of(window, preemptibleRuns, smallSize);
    int behind = window.size() - considered.size(); // one user's calls after their first few
    Set<String> cut = quickCut;
    if (considered == window && slowCalls > 0) {
      // The quick users' calls are already what CappedCalls keeps of them (their first r):
      // it thins the others' only. Over 2,000 users under their cap on a full cluster, thinning
      // the quick ones again was a sixth of the event loop.
      List<Task> slowWindow = window.subList(0, slowCalls);
      CappedCalls.Thinned thinned = CappedCalls.without(slowWindow, preemptibleRuns, running,
          policy);
      if (thinned.calls() != slowWindow) {
        considered = new ArrayList<>(thinned.calls());
        considered.addAll(quick);
        leftOut = true;
      }
      mayStart.removeAll(thinned.atCap());
      cut.addAll(thinned.cut());
    }
    for (String user : mayStart) {
      if (!cut.contains(user)) { // a larger window would find a cut user's calls capped too
        behind += Math.max(0, tasks.queuedCount(user) - perUser);
      }
    }
    return new Choice(considered, active, leftOut, behind, considered == window);
  }
}
