package dev.bulletin.protocol;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Instant;
import java.time.ZoneId;
import java.time.format.DateTimeFormatter;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import org.junit.jupiter.api.Test;

class LogLineTest {
  private static final Instant AT = Instant.parse("2026-11-23T21:05:07.123Z");
  private static final String LOCAL_TIME = DateTimeFormatter.ofPattern("yyyy-MM-dd HH:mm:ss.SSS")
      .withZone(ZoneId.systemDefault()).format(AT);

  private static LogRecord record(Level level, String message, Object... parameters) {
    LogRecord record = new LogRecord(level, message);
    record.setInstant(AT);
    record.setLoggerName(LogSetup.CALLS);
    record.setParameters(parameters.length == 0 ? null : parameters);
    return record;
  }

  @Test
  void oneLineWithTimeLevelLoggerAndMessage() {
    String line = new LogSetup.LineFormatter()
        .format(record(Level.INFO, "call c1 QUEUED -> RUNNING"));
    assertEquals(LOCAL_TIME + " INFO bulletin.calls: call c1 QUEUED -> RUNNING"
        + System.lineSeparator(), line);
  }

  @Test
  void parametersAreFilledIn() {
    String line = new LogSetup.LineFormatter()
        .format(record(Level.WARNING, "worker {0} lost after {1} s", "w1", 3));
    assertEquals(LOCAL_TIME + " WARNING bulletin.calls: worker w1 lost after 3 s"
        + System.lineSeparator(), line);
  }

  @Test
  void aThrownExceptionFollowsWithItsStack() {
    LogRecord record = record(Level.SEVERE, "pass failed");
    record.setThrown(new IllegalStateException("boom"));
    String[] lines = new LogSetup.LineFormatter().format(record).split(System.lineSeparator());
    assertEquals(LOCAL_TIME + " SEVERE bulletin.calls: pass failed", lines[0]);
    assertEquals("java.lang.IllegalStateException: boom", lines[1]);
    assertTrue(lines[2].trim().startsWith("at dev.bulletin.protocol.LogLineTest."), lines[2]);
  }
}
