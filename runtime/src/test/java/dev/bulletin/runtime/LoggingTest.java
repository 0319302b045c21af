package dev.bulletin.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import org.junit.jupiter.api.Test;

/** The runtime's SLF4J provider is bound, and library logs reach java.util.logging. */
class LoggingTest {

  @Test
  void slf4jIsBoundToJavaUtilLogging() {
    assertEquals("org.slf4j.jul.JDK14LoggerFactory",
        org.slf4j.LoggerFactory.getILoggerFactory().getClass().getName());
    Logger jul = Logger.getLogger("org.apache.arrow.logging-test");
    java.util.List<LogRecord> seen = new java.util.ArrayList<>();
    java.util.logging.Handler handler = new java.util.logging.Handler() {
      @Override
      public void publish(LogRecord record) {
        seen.add(record);
      }

      @Override
      public void flush() {}

      @Override
      public void close() {}
    };
    jul.addHandler(handler);
    jul.setLevel(Level.INFO);
    try {
      org.slf4j.LoggerFactory.getLogger("org.apache.arrow.logging-test").info("from a library");
    } finally {
      jul.removeHandler(handler);
    }
    assertTrue(seen.stream().anyMatch(r -> r.getMessage().equals("from a library")), "" + seen);
  }
}
