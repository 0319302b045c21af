package dev.bulletin.runtime.control;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.runtime.identity.Identity;
import dev.bulletin.runtime.scheduler.Demand;
import dev.bulletin.runtime.task.Task;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * When a pass may look at a user's first few queued calls only ({@link SmallWindow}), and when
 * the full window is kept.
 */
class SmallWindowTest {

  private static Task task(String id, String user, Demand demand) {
    ObjectKey object = ObjectKey.of(user, "0".repeat(32));
    return new Task(id, "f", new Identity(user, "default", true), demand, object, object,
        List.of(), 0, event -> { }, 0);
  }

  private static List<Task> queue(String user, int count) {
    List<Task> tasks = new ArrayList<>();
    for (int i = 0; i < count; i++) {
      tasks.add(task(user + i, user, new Demand(0, 1, 0)));
    }
    return tasks;
  }

  /** The small window of {@code window}; {@code preemptibleRuns}: a call placed or running is. */
  private static List<Task> cut(List<Task> window, boolean preemptibleRuns) {
    return SmallWindow.of(window, preemptibleRuns, SmallWindow.PER_USER);
  }

  @Test
  void oneUsersUniformQueueIsCutToItsFirstFew() {
    List<Task> window = queue("ada", 32);
    List<Task> small = cut(window, false);
    assertEquals(window.subList(0, SmallWindow.PER_USER), small);
  }

  @Test
  void aWindowNoLargerThanTheSmallOneIsKept() {
    List<Task> window = queue("ada", SmallWindow.PER_USER);
    assertSame(window, cut(window, false));
  }

  @Test
  void severalUsersKeepTheFullWindow() {
    // Fair share interleaves users: a cut window would tell other positions than the full one.
    List<Task> window = queue("ada", 16);
    window.addAll(queue("bob", 16));
    assertSame(window, cut(window, false));
  }

  @Test
  void aCallOfAnotherShapeKeepsTheFullWindow() {
    // A smaller call further back may fit where the first ones do not (backfill).
    List<Task> window = queue("ada", 31);
    window.add(task("small", "ada", new Demand(0, 0.5, 0)));
    assertSame(window, cut(window, false));
  }

  @Test
  void priorityCreditsOrAnotherQosKeepTheFullWindow() {
    List<Task> byPriority = queue("ada", 32);
    byPriority.get(20).scheduling("", 5, 0, Duration.ZERO);
    assertSame(byPriority, cut(byPriority, false));
    List<Task> byCredits = queue("ada", 32);
    byCredits.get(20).scheduling("", 0, 3, Duration.ZERO);
    assertSame(byCredits, cut(byCredits, false));
    List<Task> byQos = queue("ada", 32);
    byQos.get(20).scheduling("urgent", 0, 0, Duration.ZERO);
    assertSame(byQos, cut(byQos, false));
  }

  @Test
  void runningPreemptibleWorkKeepsTheFullWindow() {
    // A reclaim plan weighs every waiting call against the victims.
    List<Task> window = queue("ada", 32);
    Task borrowed = task("lent", "bob", new Demand(1, 1, 0));
    borrowed.placedPreemptible(true);
    assertSame(window, cut(window, borrowed.preemptible()));
    borrowed.placedPreemptible(false);
    assertEquals(SmallWindow.PER_USER, cut(window, borrowed.preemptible()).size());
  }
}
