package dev.bulletin.runtime.control;

import dev.bulletin.runtime.scheduler.policy.PolicyConfig;
import dev.bulletin.runtime.scheduler.policy.QosClass;
import dev.bulletin.runtime.task.Task;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Which calls a pass that only fills freed slots may leave out when several users wait: those
 * that cannot start in this pass because of their QoS class's per-user cap, whatever else the
 * pass does. A pass only adds to what a user runs, so:
 * <ul>
 *   <li>a call whose user already runs as many calls of its class as the class allows each
 *       user waits ({@code QosLimitCheck});
 *   <li>of a user's calls of one class that the scheduler cannot tell apart (one shape, no
 *       priority, in submit order: {@link SmallWindow#sameShape}), with r more allowed, only the
 *       first r can start: a later one starts only if the ones ahead of it could, and then the
 *       cap is reached. This holds only while nothing preemptible runs (else a call deferred to
 *       the lending phase lets one behind it plan preemptions).
 * </ul>
 * A call that waits takes nothing, so the placements of the others are the same. Kept anyway:
 * calls offering credits (the offers a group's balance covers are counted over every queued
 * one), calls that read values kept on a GPU (each may be held to its own worker), and calls big
 * enough for a backfill reservation (the oldest few such calls are decided first, and which are
 * the few depends on all of them). Positions are not the same, so such a pass tells no call why
 * it waits: the full window, which still runs regularly ({@link Passes}), does.
 *
 * <p>With the default class (4 calls per user at once) and as many users as fill the cluster
 * (make bench-scale: 2,000 users on 1,000 simulated workers), nearly every user is at the cap,
 * and each pass over every user's window cost the whole queue for the few slots an end frees.
 */
final class CappedCalls {

  /** One user's calls of one class in the window, and whether all are alike. */
  private static final class Run {
    final Task first;
    final int left;
    boolean alike = true;
    long lastSubmitted = Long.MIN_VALUE;
    int kept;

    Run(Task first, int left) {
      this.first = first;
      this.left = left;
    }
  }

  /**
   * @param calls the window without the calls left out; the window itself when none were
   * @param atCap users every one of whose calls in the window was left out at their cap
   * @param cut users some of whose calls were left out: a larger window would find their
   *     calls behind it at the cap as well (growing it helps only users without one)
   */
  record Thinned(List<Task> calls, java.util.Set<String> atCap, java.util.Set<String> cut) {}

  private CappedCalls() {}

  /**
   * {@code window} without the calls that cannot start in this pass for their class's cap
   * ({@code preemptibleRuns}: a call placed or running runs preemptible; {@code running}: how
   * many calls each user has placed or running in each class).
   */
  static Thinned without(List<Task> window, boolean preemptibleRuns, UserRunning running,
      PolicyConfig policy) {
    // The window holds each user's calls together: how many more of a class the user may
    // start is looked up once per user and class, and a user's runs once per run of their
    // calls, not per call (each hash of a name was a few per cent of a pass over 2,000 users).
    Left left = new Left(running, policy);
    int size = window.size();
    int[] more = new int[size];
    boolean[] leavable = new boolean[size];
    // Users under their cap: their runs of each class, to keep only the first few of alike ones.
    Map<String, Map<String, Run>> runs = new HashMap<>();
    Map<String, Run> own = null;
    String ownUser = null;
    for (int i = 0; i < size; i++) {
      Task task = window.get(i);
      more[i] = left.of(task);
      leavable[i] = mayLeaveOut(task, policy);
      int allowed = more[i];
      if (allowed > 0 && allowed != QosClass.UNLIMITED && leavable[i]) {
        if (!task.owner().user().equals(ownUser)) {
          ownUser = task.owner().user();
          own = runs.computeIfAbsent(ownUser, user -> new HashMap<>(4));
        }
        Run run = own.computeIfAbsent(task.qos(), qos -> new Run(task, allowed));
        long submitted = task.submittedAt().toEpochMilli();
        run.alike &= !preemptibleRuns && SmallWindow.sameShape(run.first, task)
            && submitted >= run.lastSubmitted;
        run.lastSubmitted = submitted;
      }
    }
    List<Task> kept = null;
    Users users = new Users();
    for (int i = 0; i < size; i++) {
      Task task = window.get(i);
      if (users.at(task.owner().user())) {
        own = runs.get(task.owner().user());
      }
      boolean atCap = more[i] == 0 && leavable[i];
      if (!atCap) {
        users.notAtCap = true;
      }
      if (!atCap && (!leavable[i] || keep(task, own))) {
        if (kept != null) {
          kept.add(task);
        }
        continue;
      }
      users.cut = true;
      if (kept == null) {
        kept = new ArrayList<>(window.subList(0, i));
      }
    }
    users.at(null);
    users.seen.removeAll(users.notAtCapUsers);
    return new Thinned(kept == null ? window : kept, users.seen, users.cutUsers);
  }

  /**
   * The users of the window, which holds each user's calls together: what was found for a user
   * is noted once per run of their calls, not per call (a hash of the name per call was a
   * tenth of this class's cost over 2,000 users).
   */
  private static final class Users {
    final java.util.Set<String> seen = new java.util.HashSet<>();
    final java.util.Set<String> notAtCapUsers = new java.util.HashSet<>();
    final java.util.Set<String> cutUsers = new java.util.HashSet<>();
    private String user;
    boolean notAtCap;
    boolean cut;

    /** The next call is {@code next}'s (null: the window ended); true when the user changed. */
    boolean at(String next) {
      if (user != null && user.equals(next)) {
        return false;
      }
      if (user != null) {
        if (notAtCap) {
          notAtCapUsers.add(user);
        }
        if (cut) {
          cutUsers.add(user);
        }
      }
      user = next;
      notAtCap = false;
      cut = false;
      if (next != null) {
        seen.add(next);
      }
      return true;
    }
  }

  /** {@link #left}, remembered for the last user and class asked. */
  private static final class Left {
    private final UserRunning running;
    private final PolicyConfig policy;
    private String user;
    private String qos;
    private int left;

    Left(UserRunning running, PolicyConfig policy) {
      this.running = running;
      this.policy = policy;
    }

    int of(Task task) {
      if (!task.owner().user().equals(user) || !task.qos().equals(qos)) {
        user = task.owner().user();
        qos = task.qos();
        left = left(task, running, policy);
      }
      return left;
    }
  }

  /**
   * A call not at its cap that may be left out: kept unless it is behind the first few of a run
   * of alike ones ({@code own}: its user's runs, or null).
   */
  private static boolean keep(Task task, Map<String, Run> own) {
    Run run = own == null ? null : own.get(task.qos());
    return run == null || !run.alike || run.kept++ < run.left;
  }

  /** How many more calls of its class the task's user may start; UNLIMITED without a cap. */
  private static int left(Task task, UserRunning running, PolicyConfig policy) {
    return left(task.owner().user(), task.qos(), running, policy);
  }

  /** How many more calls of class {@code qos} {@code user} may start; UNLIMITED without a cap. */
  static int left(String user, String qos, UserRunning running, PolicyConfig policy) {
    QosClass qosClass = policy.qos().get(qos);
    if (qosClass == null || qosClass.maxCallsPerUser() == QosClass.UNLIMITED) {
      return QosClass.UNLIMITED;
    }
    return Math.max(0, qosClass.maxCallsPerUser() - running.of(user, qos));
  }

  /** Not a call a pass must see whatever its cap says (see the class comment). */
  static boolean mayLeaveOut(Task task, PolicyConfig policy) {
    // Largest worker 0: the smallest size backfill could ever reserve for (at least 2 GPUs).
    return task.credits() == 0 && task.residentHandles().isEmpty()
        && !policy.backfill().reserves(task.demand().gpus(), Long.MAX_VALUE, 0);
  }
}
