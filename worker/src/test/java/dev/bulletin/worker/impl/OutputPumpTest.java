package dev.bulletin.worker.impl;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;

class OutputPumpTest {

  private final ByteArrayOutputStream forwarded = new ByteArrayOutputStream();
  private final List<String> sentinels = new ArrayList<>();
  private final List<String> announcements = new ArrayList<>();
  private final List<String> safe = new ArrayList<>();
  private final List<String> returned = new ArrayList<>();
  private final Map<String, Consumer<String>> markers = Map.of(
      OutputPump.SENTINEL_WORD, sentinels::add, OutputPump.READY_WORD, announcements::add,
      OutputPump.PREEMPT_SAFE_WORD, safe::add, OutputPump.RETURNED_WORD, returned::add);
  private final OutputPump pump = new OutputPump(new ByteArrayInputStream(new byte[0]),
      forwarded::writeBytes, markers, () -> { });

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
  void theReturnedLineIsRecognisedAndNotForwarded() {
    feed("result coming\n\u001eBULLETIN-RETURNED t8\n");
    assertEquals(List.of("t8"), returned);
    assertEquals("result coming\n", output());
  }

  @Test
  void aLineOfAnUnknownWordIsOutput() {
    feed("\u001eBULLETIN-SOMETHING t9\n\u001eBULLETIN-END\n");
    assertEquals("\u001eBULLETIN-SOMETHING t9\n\u001eBULLETIN-END\n", output());
    assertEquals(List.of(), sentinels);
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
        forwarded::writeBytes, markers, () -> { });
    ending.run();
    assertEquals("tail\u001eno newline", output());
  }
}
