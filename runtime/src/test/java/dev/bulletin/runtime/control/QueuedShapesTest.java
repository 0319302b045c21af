package dev.bulletin.runtime.control;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
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
import java.util.List;
import org.junit.jupiter.api.Test;

/** The census of what each user has queued ({@link QueuedShapes}), kept from the table's moves. */
class QueuedShapesTest {

  private final TaskTable tasks = new TaskTable();
  private final QueuedShapes shapes = new QueuedShapes(PolicyConfig.defaults());
  private int next;

  QueuedShapesTest() {
    tasks.listen(shapes);
  }

  private Task queue(String user, String qos, Demand demand, double credits, long submitted) {
    ObjectKey object = ObjectKey.of(user, "0".repeat(32));
    Task task = new Task("c" + next++, "f", new Identity(user, "default", true), demand, object,
        object, List.of(), 0, event -> { }, 0);
    task.scheduling(qos, 0, credits, Duration.ZERO);
    task.restored(Instant.EPOCH.plusMillis(submitted), 0);
    tasks.add(task);
    return task;
  }

  @Test
  void alikeCallsInSubmitOrderHaveOneClassAndLeavingTheQueueIsCounted() {
    Task first = queue("ada", "interactive", new Demand(1, 1, 0), 0, 1);
    queue("ada", "interactive", new Demand(1, 1, 0), 0, 2);
    assertEquals("interactive", shapes.uniformClass("ada"));
    Task other = queue("ada", "interactive", new Demand(0, 1, 0), 0, 3);
    assertNull(shapes.uniformClass("ada"), "two shapes");
    tasks.transitionQuietly(other, TaskState.CANCELLED);
    assertEquals("interactive", shapes.uniformClass("ada"));
    tasks.transitionQuietly(first, TaskState.PLACED);
    assertEquals("interactive", shapes.uniformClass("ada"));
    assertNull(shapes.uniformClass("bob"), "nothing queued");
  }

  @Test
  void aRequeueBehindLaterCallsCreditsOrAnotherClassTakeTheLongPath() {
    Task placed = queue("ada", "interactive", new Demand(1, 1, 0), 0, 1);
    queue("ada", "interactive", new Demand(1, 1, 0), 0, 2);
    tasks.transitionQuietly(placed, TaskState.PLACED);
    placed.requeued();
    tasks.transitionQuietly(placed, TaskState.QUEUED); // behind the call submitted after it
    assertNull(shapes.uniformClass("ada"));
    queue("bob", "interactive", new Demand(1, 1, 0), 2, 1);
    assertNull(shapes.uniformClass("bob"), "credits");
    queue("cy", "interactive", new Demand(1, 1, 0), 0, 1);
    queue("cy", "batch", new Demand(1, 1, 0), 0, 2);
    assertNull(shapes.uniformClass("cy"));
  }

  @Test
  void allAtCapOnlyWhenEveryQueuedCallMayBeLeftOutInAClassWithNoRoom() {
    queue("ada", "interactive", new Demand(1, 1, 0), 0, 1);
    queue("ada", "batch", new Demand(1, 1, 0), 0, 2);
    assertTrue(shapes.allAtCap("ada", qos -> 0));
    assertFalse(shapes.allAtCap("ada", qos -> qos.equals("batch") ? 1 : 0));
    queue("ada", "interactive", new Demand(1, 1, 0), 3, 3);
    assertFalse(shapes.allAtCap("ada", qos -> 0), "a call with credits is never left out");
    assertFalse(shapes.allAtCap("bob", qos -> 0), "nothing queued");
  }
}
