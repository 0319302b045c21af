package dev.bulletin.worker.impl;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class OutputPumpTest {

  private final ByteArrayOutputStream forwarded = new ByteArrayOutputStream();
  private final List<String> sentinels = new ArrayList<>();
  private final List<String> announcements = new ArrayList<>();
  private final List<String> safe = new ArrayList<>();
  private final OutputPump pump = new OutputPump(new ByteArrayInputStream(new byte[0]),
      forwarded::writeBytes, sentinels::add, announcements::add, safe::add, () -> { });

  private void feed(String text) {
    pump.accept(text.getBytes(StandardCharsets.UTF_8));
  }

  private String output() {
    return forwarded.toString(StandardCharsets.UTF_8);
  }

  @Test
  void forwardsOutputAndRecognisesTheSentinel() {
    feed("hello\n\u001eBULLETIN-END t1\nafter\n");
    assertEquals("hello\nafter\n", output());
    assertEquals(List.of("t1"), sentinels);
  }

  @Test
  void aSentinelSplitAcrossReadsIsStillRecognised() {
    feed("partial line\u001eBULLETIN-");
    assertEquals("partial line", output());
    feed("END t2\n");
    assertEquals(List.of("t2"), sentinels);
    assertEquals("partial line", output());
  }

  @Test
  void theExecutorsAnnouncementIsRecognisedAndNotForwarded() {
    feed("\u001eBULLETIN-READY 40123 p0\nfirst output\n");
    assertEquals(List.of("40123 p0"), announcements);
    assertEquals("first output\n", output());
  }

  @Test
  void thePreemptSafeLineIsRecognisedAndNotForwarded() {
    feed("saving\n\u001eBULLETIN-PREEMPT-SAFE t7\nmore\n");
    assertEquals(List.of("t7"), safe);
    assertEquals("saving\nmore\n", output());
  }

  @Test
  void aRecordSeparatorInUserOutputIsKept() {
    feed("a\u001eb\n");
    assertEquals("a\u001eb\n", output());
    assertEquals(List.of(), sentinels);
  }

  @Test
  void pendingBytesAreFlushedWhenTheStreamEnds() {
    OutputPump ending = new OutputPump(
        new ByteArrayInputStream("tail\u001eno newline".getBytes(StandardCharsets.UTF_8)),
        forwarded::writeBytes, sentinels::add, announcements::add, safe::add, () -> { });
    ending.run();
    assertEquals("tail\u001eno newline", output());
  }
}
