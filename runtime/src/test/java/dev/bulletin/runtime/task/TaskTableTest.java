package dev.bulletin.runtime.task;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.protocol.TaskEvent;
import dev.bulletin.runtime.identity.Identity;
import dev.bulletin.runtime.scheduler.Demand;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class TaskTableTest {

  private final List<TaskEvent> sent = new ArrayList<>();
  private final TaskTable table = new TaskTable();

  private Task task(String id) {
    ObjectKey object = ObjectKey.of("ada", "0".repeat(32));
    return new Task(id, "f", new Identity("ada", "default", true), new Demand(0, 1, 0), object,
        object, List.of(), 0, sent::add, 0);
  }

  private static TaskEvent event(String id, dev.bulletin.protocol.TaskState state) {
    return TaskEvent.newBuilder().setTaskId(id).setState(state).build();
  }

  @Test
  void followsTheLifeCycleAndForgetsTerminalTasks() {
    Task task = task("t1");
    assertTrue(table.add(task));
    assertEquals(List.of(task), table.queued());
    table.transition(task, TaskState.PLACED, event("t1", dev.bulletin.protocol.TaskState.PLACED));
    table.transition(task, TaskState.RUNNING, event("t1", dev.bulletin.protocol.TaskState.RUNNING));
    table.transition(task, TaskState.FINISHED, event("t1", dev.bulletin.protocol.TaskState.FINISHED));
    assertFalse(table.get("t1").isPresent());
    assertEquals(3, sent.size());
  }

  @Test
  void refusesMovesTheLifeCycleForbids() {
    Task task = task("t1");
    table.add(task);
    table.transition(task, TaskState.CANCELLED, event("t1", dev.bulletin.protocol.TaskState.CANCELLED));
    assertThrows(IllegalStateException.class, () -> table.transition(task, TaskState.RUNNING,
        event("t1", dev.bulletin.protocol.TaskState.RUNNING)));
  }

  @Test
  void duplicateIdsAreRefused() {
    assertTrue(table.add(task("t1")));
    assertFalse(table.add(task("t1")));
  }

  @Test
  void aRequeuedTaskWaitsBehindTheQueueAndUsesUpARetry() {
    Task lost = task("lost");
    Task waiting = task("waiting");
    lost.allowRetries(1);
    table.add(lost);
    table.add(waiting);
    table.transition(lost, TaskState.PLACED, event("lost", dev.bulletin.protocol.TaskState.PLACED));
    table.transition(lost, TaskState.RUNNING, event("lost", dev.bulletin.protocol.TaskState.RUNNING));
    lost.requeued();
    table.transition(lost, TaskState.QUEUED, event("lost", dev.bulletin.protocol.TaskState.QUEUED));
    assertEquals(List.of(waiting, lost), table.queued());
    assertEquals(0, lost.retriesLeft());
    assertEquals(1, lost.requeues());
    assertEquals(null, lost.workerId());
  }
}
