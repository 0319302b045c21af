package dev.bulletin.runtime.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import dev.bulletin.protocol.TaskEvent;
import java.util.List;
import org.junit.jupiter.api.Test;

/** A session's kept events: numbered in order, forgotten once seen, bounded. */
class SessionEventLogTest {

  private static TaskEvent event(String taskId) {
    return TaskEvents.queued(taskId);
  }

  @Test
  void eventsAreNumberedFromOneAndReplayedAfterTheLastSeen() {
    SessionEventLog log = new SessionEventLog(0);
    assertEquals(1, log.add(event("a")));
    assertEquals(2, log.add(event("b")));
    assertEquals(3, log.add(event("c")));
    assertEquals(List.of("b", "c"), log.after(1).stream().map(TaskEvent::getTaskId).toList());
    log.acknowledge(2);
    assertEquals(1, log.size());
    assertTrue(log.canReplayAfter(2));
    assertEquals(List.of("c"), log.after(2).stream().map(TaskEvent::getTaskId).toList());
  }

  @Test
  void pastItsBoundTheOldestGoAndAResumeNeedingThemIsRefused() {
    SessionEventLog log = new SessionEventLog(0);
    TaskEvent big = TaskEvents.output("t", false, new byte[1 << 20]);
    for (int i = 0; i < 70; i++) { // 70 MiB of output: more than the 64 MiB kept
      log.add(big);
    }
    assertTrue(log.size() < 70);
    assertFalse(log.canReplayAfter(0), "the first events are gone");
    assertTrue(log.canReplayAfter(70 - log.size()));
    assertEquals(ByteString.copyFrom(new byte[1 << 20]), log.after(69).get(0).getOutput().getData());
  }

  @Test
  void aRestoredSessionGoesOnAfterTheSeqItsClientSaw() {
    SessionEventLog log = new SessionEventLog(5); // restored: the journal knew 5 events
    log.catchUp(9); // its client had seen 9
    assertTrue(log.canReplayAfter(9));
    assertEquals(10, log.add(event("x")));
  }
}
