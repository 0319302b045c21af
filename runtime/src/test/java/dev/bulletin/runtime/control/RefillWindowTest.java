package dev.bulletin.runtime.control;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.runtime.identity.Identity;
import dev.bulletin.runtime.scheduler.Demand;
import dev.bulletin.runtime.scheduler.policy.PolicyConfig;
import dev.bulletin.runtime.task.Task;
import dev.bulletin.runtime.task.TaskState;
import dev.bulletin.runtime.task.TaskTable;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * What a refill pass considers ({@link RefillWindow}): the calls {@link CappedCalls} keeps of
 * every waiting user's window, whether the census ({@link QueuedShapes}) decided a user without
 * reading their calls or not. Random queues of several users (alike calls, other shapes, other
 * classes, credits, requeues out of submit order, preemptible work running) against the rules
 * applied call by call.
 */
class RefillWindowTest {

  private static final PolicyConfig POLICY = PolicyConfig.defaults();
  private static final int PER_USER = Passes.WINDOW_PER_USER;
  private static final Instant EPOCH = Instant.parse("2026-11-29T00:00:00Z");

  private final TaskTable tasks = new TaskTable(task -> task.credits() > 0);
  private final RefillWindow windows = new RefillWindow(tasks, POLICY);
  private final List<Task> active = new ArrayList<>();
  private int next;

  private Task queue(String user, String qos, Demand demand, double credits, long submitted) {
    ObjectKey object = ObjectKey.of(user, "0".repeat(32));
    Task task = new Task("c" + next++, "f", new Identity(user, "default", true), demand, object,
        object, List.of(), 0, event -> { }, 0);
    task.scheduling(qos, 0, credits, Duration.ZERO);
    task.restored(EPOCH.plusMillis(submitted), 0);
    tasks.add(task);
    return task;
  }

  private void place(Task task, boolean preemptible) {
    task.placedPreemptible(preemptible);
    tasks.transitionQuietly(task, TaskState.PLACED);
    active.add(task);
  }

  /** The calls the rules keep, read call by call from every user's window. */
  private Set<Task> keptCallByCall() {
    UserRunning running = new UserRunning();
    running.recount(active);
    return new HashSet<>(CappedCalls.without(tasks.window(PER_USER), running.anyPreemptible(),
        running, POLICY).calls());
  }

  private static Set<String> ids(java.util.Collection<Task> calls) {
    Set<String> ids = new java.util.TreeSet<>();
    for (Task task : calls) {
      ids.add(task.id());
    }
    return ids;
  }

  private RefillWindow.Choice refill() {
    return windows.choose(false, PER_USER, SmallWindow.PER_USER, () -> new ArrayList<>(active));
  }

  @Test
  void aRefillPassConsidersWhatTheCapRulesKeepForEveryShapeOfQueue() {
    Random random = new Random(7);
    for (int round = 0; round < 300; round++) {
      RefillWindowTest test = new RefillWindowTest();
      test.fill(random);
      test.windows.choose(true, PER_USER, SmallWindow.PER_USER, () -> new ArrayList<>(test.active));
      test.endSome(random);
      Set<String> expected = ids(test.keptCallByCall());
      assertEquals(expected, ids(test.refill().considered()), "round " + round);
      // Users found at their cap are not read again, and what may start stays the same.
      assertEquals(expected, ids(test.refill().considered()), "round " + round);
    }
  }

  /**
   * Three to six users, each with a queue of one of several shapes, some of it placed; and one
   * with a single call, so that the window is never one user's (which {@link SmallWindow} cuts
   * by a rule of its own).
   */
  private void fill(Random random) {
    queue("zed", "interactive", new Demand(1, 1, 0), 0, 0);
    int users = 3 + random.nextInt(4);
    for (int u = 0; u < users; u++) {
      String user = "user" + u;
      int kind = random.nextInt(6);
      int count = random.nextInt(45);
      long submitted = 0;
      for (int i = 0; i < count; i++) {
        String qos = kind == 1 && random.nextInt(4) == 0 ? "batch" : "interactive";
        Demand demand = kind == 2 && random.nextInt(5) == 0 ? new Demand(0, 2, 0)
            : new Demand(1, 1, 0);
        double credits = kind == 3 && random.nextInt(6) == 0 ? 2 : 0;
        long at = kind == 4 && random.nextInt(5) == 0 ? submitted - 5 : ++submitted;
        Task task = queue(user, qos, demand, credits, at);
        if (i < 4 && random.nextBoolean()) {
          place(task, kind == 5 && random.nextInt(3) == 0);
        }
      }
    }
  }

  /** Ends or requeues some placed calls: their users may start calls again. */
  private void endSome(Random random) {
    for (Task task : List.copyOf(active)) {
      int what = random.nextInt(4);
      if (what == 0) {
        tasks.transitionQuietly(task, TaskState.RUNNING);
        tasks.transitionQuietly(task, TaskState.FINISHED);
        active.remove(task);
      } else if (what == 1) {
        task.requeued();
        tasks.transitionQuietly(task, TaskState.QUEUED);
        active.remove(task);
      }
    }
  }

  @Test
  void aUserAtTheCapWithAlikeCallsIsLeftOutAndAUserBelowItGetsItsFirstFew() {
    for (int i = 0; i < 10; i++) {
      Task task = queue("ada", "interactive", new Demand(1, 1, 0), 0, i);
      if (i < 4) {
        place(task, false);
      }
      Task other = queue("bob", "interactive", new Demand(1, 1, 0), 0, i);
      if (i < 2) {
        place(other, false);
      }
    }
    windows.choose(true, PER_USER, SmallWindow.PER_USER, () -> new ArrayList<>(active));
    tasks.transitionQuietly(active.get(0), TaskState.RUNNING); // no room made: nothing moves
    RefillWindow.Choice choice = refill();
    assertEquals(tasks.queued().stream().filter(t -> t.owner().user().equals("bob"))
        .limit(2).toList(), choice.considered());
    assertTrue(choice.leftOut());
    assertEquals(0, choice.behind());
  }
}
