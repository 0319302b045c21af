package dev.bulletin.protocol;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.params.provider.ValueSource;

class QuantitiesTest {

  static Stream<Arguments> durations() {
    return Stream.of(
        Arguments.of("500ms", Duration.ofMillis(500)),
        Arguments.of("90s", Duration.ofSeconds(90)),
        Arguments.of("10m", Duration.ofMinutes(10)),
        Arguments.of("2h", Duration.ofHours(2)),
        Arguments.of("7d", Duration.ofDays(7)),
        Arguments.of("1h30m", Duration.ofMinutes(90)),
        Arguments.of("1h 30m", Duration.ofMinutes(90)),
        Arguments.of("90 s", Duration.ofSeconds(90)),
        Arguments.of(" 2H ", Duration.ofHours(2)),
        Arguments.of("1d2h3m4s", Duration.ofDays(1).plusHours(2).plusMinutes(3).plusSeconds(4)),
        Arguments.of("04:00:00", Duration.ofHours(4)),
        Arguments.of("1-12:00:00", Duration.ofHours(36)),
        Arguments.of("1-12:30", Duration.ofHours(36).plusMinutes(30)),
        Arguments.of("1:30", Duration.ofSeconds(90)));
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("durations")
  void everyDurationFormReads(String text, Duration expected) {
    assertEquals(expected, Quantities.parseDuration(text));
    assertEquals(expected, Quantities.parseDurationOrUnlimited(text));
  }

  @ParameterizedTest(name = "''{0}''")
  @ValueSource(strings = {"", "10", "1.5h", "5m3", "h2", "2 weeks", "1 0m", "soon", "unlimited",
      "-5m", "1:2:3:4"})
  void otherDurationsAreRefusedNamingTheForms(String text) {
    IllegalArgumentException error = assertThrows(IllegalArgumentException.class,
        () -> Quantities.parseDuration(text));
    assertEquals("'" + text + "' is not a duration; use a number with a unit: 500ms, 90s, 10m,"
        + " 2h, 7d, 1h30m, 1h 30m; or Slurm's [D-]HH:MM[:SS]", error.getMessage());
  }

  @Test
  void unlimitedOnlyWhereTheFieldAllowsIt() {
    assertEquals(Quantities.UNLIMITED, Quantities.parseDurationOrUnlimited("unlimited"));
    assertEquals(Quantities.UNLIMITED, Quantities.parseDurationOrUnlimited(" Unlimited"));
    IllegalArgumentException error = assertThrows(IllegalArgumentException.class,
        () -> Quantities.parseDurationOrUnlimited("forever"));
    assertTrue(error.getMessage().endsWith("; or unlimited"), error.getMessage());
  }

  @Test
  void aDurationBeyondALongIsRefusedNotOverflowed() {
    IllegalArgumentException error = assertThrows(IllegalArgumentException.class,
        () -> Quantities.parseDuration("99999999999999999999d"));
    assertEquals("'99999999999999999999d' is too long a duration", error.getMessage());
    assertThrows(IllegalArgumentException.class, () -> Quantities.parseDuration("9999999999999999d"));
  }

  @Test
  void sizesReadInBinaryUnits() {
    assertEquals(64L << 30, Quantities.parseSize("64GiB"));
    assertEquals(64L << 30, Quantities.parseSize("64G"));
    assertEquals(64L << 30, Quantities.parseSize("64 gib"));
    assertEquals(512L << 20, Quantities.parseSize("512MiB"));
    assertEquals(100L, Quantities.parseSize("100B"));
    assertEquals(1000L, Quantities.parseSize("1000"));
    assertEquals("64GiB", Quantities.formatSize(64L << 30));
    assertEquals("1536MiB", Quantities.formatSize(1536L << 20));
  }

  @ParameterizedTest(name = "''{0}''")
  @ValueSource(strings = {"lots", "1.5G", "64GB RAM", "12X", "GiB", "-1"})
  void otherSizesAreRefusedNamingTheForms(String text) {
    IllegalArgumentException error = assertThrows(IllegalArgumentException.class,
        () -> Quantities.parseSize(text));
    assertEquals("'" + text + "' is not a size; use a number of bytes with a unit: 512MiB, 64GiB,"
        + " 64G (binary units, as Slurm reads them)", error.getMessage());
  }

  @Test
  void tooLargeSizesAreRefused() {
    assertEquals("'9999999999999999999' is too large", assertThrows(IllegalArgumentException.class,
        () -> Quantities.parseSize("9999999999999999999")).getMessage());
    assertEquals("'99999999999T' is too large", assertThrows(IllegalArgumentException.class,
        () -> Quantities.parseSize("99999999999T")).getMessage());
  }

  @Test
  void slurmTimeRoundsUpToTheSecond() {
    assertEquals("0-04:00:00", Quantities.slurmTime(Duration.ofHours(4)));
    assertEquals("1-00:01:30", Quantities.slurmTime(Duration.ofDays(1).plusSeconds(90)));
    assertEquals("0-00:00:01", Quantities.slurmTime(Duration.ofMillis(1)));
  }
}
