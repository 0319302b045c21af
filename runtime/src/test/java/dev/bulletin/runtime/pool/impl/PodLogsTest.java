package dev.bulletin.runtime.pool.impl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

/** The tail of a failed Pod's log that goes into its reason: bounded, on one line. */
class PodLogsTest {
  @Test
  void theLastNonBlankLinesOnOneLine() {
    assertEquals("starting | ModuleNotFoundError: No module named 'bulletin'",
        PodLogs.tail("starting\r\n\n   \nModuleNotFoundError: No module named 'bulletin'  \n"));
    assertEquals("", PodLogs.tail(""));
    assertEquals("", PodLogs.tail(null));
  }

  @Test
  void atMostTwentyLinesAndTwoThousandCharactersTheEndKept() {
    String many = IntStream.rangeClosed(1, 50).mapToObj(i -> "line " + i)
        .collect(Collectors.joining("\n"));
    String tail = PodLogs.tail(many);
    assertTrue(tail.startsWith("line 31 | ") && tail.endsWith(" | line 50"), tail);

    String longLine = "x".repeat(5000) + "the end";
    tail = PodLogs.tail(longLine);
    assertEquals(PodLogs.CHARS, tail.length());
    assertTrue(tail.startsWith("...x") && tail.endsWith("the end"), tail);
  }
}
