package dev.bulletin.runtime.control;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.runtime.identity.Identity;
import dev.bulletin.runtime.scheduler.Demand;
import dev.bulletin.runtime.scheduler.policy.PolicyConfig;
import dev.bulletin.runtime.task.Task;
import dev.bulletin.runtime.task.TaskState;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * Which calls a refill pass leaves out for their QoS class's per-user cap ({@link CappedCalls}):
 * only calls that could not start in it whatever it did. The default policy's interactive class
 * allows 4 calls per user at once.
 */
class CappedCallsTest {

  private static final PolicyConfig POLICY = PolicyConfig.defaults();

  private static Task task(String id, String user, String qos, Demand demand) {
    ObjectKey object = ObjectKey.of(user, "0".repeat(32));
    Task task = new Task(id, "f", new Identity(user, "default", true), demand, object, object,
        List.of(), 0, event -> { }, 0);
    task.scheduling(qos, 0, 0, Duration.ZERO);
    return task;
  }

  private static List<Task> queue(String user, String qos, int count) {
    List<Task> tasks = new ArrayList<>();
    for (int i = 0; i < count; i++) {
      tasks.add(task(user + "-" + qos + i, user, qos, new Demand(1, 1, 0)));
    }
    return tasks;
  }

  /** The counts of {@code active}, each placed. */
  private static UserRunning running(List<Task> active) {
    UserRunning running = new UserRunning();
    for (Task task : active) {
      running.moved(task, TaskState.QUEUED, TaskState.PLACED);
    }
    return running;
  }

  /** {@code window} thinned with {@code active} placed or running. */
  private static CappedCalls.Thinned thin(List<Task> window, List<Task> active) {
    UserRunning running = running(active);
    return CappedCalls.without(window, running.anyPreemptible(), running, POLICY);
  }

  @Test
  void aUserAtTheCapHasNoCallConsideredAndIsNamed() {
    List<Task> active = queue("ada", "interactive", 4);
    List<Task> window = queue("bob", "interactive", 3);
    window.addAll(queue("ada", "interactive", 10).subList(4, 10));
    CappedCalls.Thinned thinned = thin(window, active);
    assertEquals(window.subList(0, 3), thinned.calls());
    assertEquals(Set.of("ada"), thinned.atCap());
  }

  @Test
  void ofAlikeCallsOnlyAsManyAsTheCapLeavesAreConsidered() {
    List<Task> active = queue("ada", "interactive", 3);
    List<Task> window = queue("ada", "interactive", 10).subList(3, 10);
    CappedCalls.Thinned thinned = thin(window, active);
    assertEquals(window.subList(0, 1), thinned.calls());
    assertEquals(Set.of(), thinned.atCap());
  }

  @Test
  void callsOfAnotherShapeOrClassOrWithCreditsAreKept() {
    List<Task> active = queue("ada", "interactive", 3);
    List<Task> window = new ArrayList<>(queue("ada", "interactive", 10).subList(3, 6));
    window.add(task("small", "ada", "interactive", new Demand(0, 1, 0)));
    assertSame(window, thin(window, active).calls());
    List<Task> otherClass = new ArrayList<>(queue("ada", "interactive", 10).subList(3, 5));
    otherClass.addAll(queue("ada", "batch", 5));
    assertEquals(otherClass.size() - 1,
        thin(otherClass, active).calls().size());
    List<Task> atCap = queue("ada", "interactive", 4);
    List<Task> withCredits = queue("ada", "interactive", 6).subList(4, 6);
    withCredits.get(1).scheduling("interactive", 0, 2, Duration.ZERO);
    assertEquals(List.of(withCredits.get(1)),
        thin(withCredits, atCap).calls());
  }

  @Test
  void runningPreemptibleWorkKeepsEveryCallUnderTheCap() {
    List<Task> active = queue("ada", "interactive", 3);
    Task borrowed = task("lent", "bob", "batch", new Demand(1, 1, 0));
    borrowed.placedPreemptible(true);
    active.add(borrowed);
    List<Task> window = queue("ada", "interactive", 10).subList(3, 10);
    assertSame(window, thin(window, active).calls());
  }

  @Test
  void callsThatEndGiveTheirUserRoomAgain() {
    List<Task> active = queue("ada", "interactive", 4);
    UserRunning running = running(active);
    running.moved(active.get(0), TaskState.RUNNING, TaskState.FINISHED);
    List<Task> window = queue("ada", "interactive", 10).subList(4, 10);
    assertEquals(window.subList(0, 1),
        CappedCalls.without(window, running.anyPreemptible(), running, POLICY).calls());
  }
}
