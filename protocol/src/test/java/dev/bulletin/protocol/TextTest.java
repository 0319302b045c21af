package dev.bulletin.protocol;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Duration;
import org.junit.jupiter.api.Test;

class TextTest {

  @Test
  void countsTakeThePluralUnlessOne() {
    assertEquals("0 GPUs", Text.count(0, "GPU"));
    assertEquals("1 GPU", Text.count(1, "GPU"));
    assertEquals("3 GPUs", Text.count(3, "GPU"));
    assertEquals("2 waiting calls", Text.count(2, "waiting call"));
    assertEquals("1 CPU", Text.count(1.0, "CPU"));
    assertEquals("1.5 CPUs", Text.count(1.5, "CPU"));
    assertEquals("0.5 CPUs", Text.count(0.5, "CPU"));
    assertEquals("worker", Text.plural(1, "worker"));
    assertEquals("workers", Text.plural(7, "worker"));
  }

  @Test
  void numbersDropAZeroFraction() {
    assertEquals("4", Text.number(4.0));
    assertEquals("2.5", Text.number(2.5));
  }

  @Test
  void bytesShowOneDecimalInTheLargestUnit() {
    assertEquals("100 B", Text.bytes(100));
    assertEquals("1.0 KiB", Text.bytes(1024));
    assertEquals("1.5 GiB", Text.bytes(3L << 29));
    assertEquals("128.0 GiB", Text.bytes(128L << 30));
  }

  @Test
  void durationsShowTheTwoLargestUnits() {
    assertEquals("0s", Text.duration(Duration.ZERO));
    assertEquals("0s", Text.duration(Duration.ofSeconds(-5)));
    assertEquals("45s", Text.duration(Duration.ofSeconds(45)));
    assertEquals("1m 30s", Text.duration(Duration.ofSeconds(90)));
    assertEquals("1h 30m", Text.duration(Duration.ofMinutes(90)));
    assertEquals("2h", Text.duration(Duration.ofHours(2).plusSeconds(5)));
    assertEquals("2d 3h", Text.duration(Duration.ofDays(2).plusHours(3).plusMinutes(4)));
    assertEquals("unlimited", Text.duration(Quantities.UNLIMITED));
  }

  @Test
  void aPrintedDurationReadsBack() {
    for (Duration d : new Duration[] {Duration.ofSeconds(90), Duration.ofMinutes(90),
        Duration.ofDays(2).plusHours(3)}) {
      assertEquals(d, Quantities.parseDuration(Text.duration(d)));
    }
  }
}
