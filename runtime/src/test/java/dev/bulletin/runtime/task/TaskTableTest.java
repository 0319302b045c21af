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
    return task(id, "ada");
  }

  private Task task(String id, String user) {
    ObjectKey object = ObjectKey.of(user, "0".repeat(32));
    return new Task(id, "f", new Identity(user, "default", true), new Demand(0, 1, 0), object,
        object, List.of(), 0, sent::add, 0);
  }

  private static java.util.Set<String> ids(List<Task> tasks) {
    java.util.Set<String> out = new java.util.TreeSet<>();
    tasks.forEach(task -> out.add(task.id()));
    return out;
  }

  @Test
  void aPassWindowHoldsEachUsersFirstCallsAndThoseThatGoAhead() {
    TaskTable byUser = new TaskTable(task -> task.id().startsWith("vip"));
    for (int i = 0; i < 5; i++) {
      byUser.add(task("a" + i, "ada"));
    }
    byUser.add(task("b0", "bob"));
    byUser.add(task("vip-a", "ada"));
    assertEquals(java.util.Set.of("a0", "a1", "b0", "vip-a"), ids(byUser.window(2)));
    // Calls leave the window as they start; the next of the same user come into view.
    Task a0 = byUser.get("a0").orElseThrow();
    byUser.transitionQuietly(a0, TaskState.PLACED);
    assertEquals(java.util.Set.of("a1", "a2", "b0", "vip-a"), ids(byUser.window(2)));
    // A requeued call waits behind its user's queue.
    byUser.transitionQuietly(a0, TaskState.QUEUED);
    byUser.transitionQuietly(byUser.get("a1").orElseThrow(), TaskState.CANCELLED);
    assertEquals(java.util.Set.of("a2", "a3", "b0", "vip-a"), ids(byUser.window(2)));
    // A short queue is the window itself; a call that goes ahead is there once.
    assertEquals(byUser.queued().size(), byUser.window(10).size());
    TaskTable early = new TaskTable(task -> task.id().startsWith("vip"));
    for (String id : List.of("vip-x", "c1", "c2")) {
      early.add(task(id, "cy"));
    }
    assertEquals(List.of("vip-x", "c1"), early.window(2).stream().map(Task::id).toList());
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
