package dev.bulletin.protocol;

import java.time.Duration;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The one grammar for sizes and durations that people write: in the runtime's YAML file (pools,
 * QoS classes, quotas) and on the worker's command line. The Python package reads the same
 * grammar. Parsers throw with the accepted forms; {@link Text} prints quantities for people.
 *
 * <p>Sizes: a whole number with an optional binary unit, case-insensitive, a space allowed
 * before the unit: {@code 1024} (bytes), {@code 100B}, {@code 512MiB}, {@code 64GiB}, {@code
 * 64G}, {@code 64 GiB}. K, M, G and T are powers of 1024, as Slurm reads them.
 *
 * <p>Durations, case-insensitive:
 * <ul>
 *   <li>one or more whole numbers with a unit ({@code ms}, {@code s}, {@code m}, {@code h},
 *       {@code d}) that add up, spaces allowed between them and before a unit: {@code 500ms},
 *       {@code 90s}, {@code 10m}, {@code 2h}, {@code 7d}, {@code 1h30m}, {@code 1h 30m},
 *       {@code 90 s};
 *   <li>Slurm's {@code [D-]HH:MM[:SS]}: {@code 04:00:00}, {@code 1-12:00:00}, {@code 1-12:00};
 *       two fields without a day are {@code MM:SS}, as Slurm reads {@code --time=1:30};
 *   <li>{@code unlimited}, only where the field allows it ({@link #parseDurationOrUnlimited}):
 *       {@link #UNLIMITED}.
 * </ul>
 * No decimals ({@code 1.5h}) and no bare numbers ({@code 90}): a bare number has no unit to
 * read, and neither grammar this one replaced accepted them.
 */
public final class Quantities {
  private Quantities() {}

  /** Stands for "no limit"; far enough to never matter, near enough that instants can add it. */
  public static final Duration UNLIMITED = Duration.ofDays(365L * 1000);

  private static final Pattern SIZE = Pattern.compile("(\\d+)\\s*([KMGT]?)(i?B?)", Pattern.CASE_INSENSITIVE);
  private static final Pattern PART = Pattern.compile("\\s*(\\d+)\\s*(ms|s|m|h|d)");
  private static final Pattern CLOCK = Pattern.compile("(?:(\\d+)-)?(\\d+):(\\d{1,2})(?::(\\d{1,2}))?");
  static final String SIZE_FORMS = "a number of bytes with a unit: 512MiB, 64GiB, 64G (binary units, as Slurm reads them)";
  static final String DURATION_FORMS = "a number with a unit: 500ms, 90s, 10m, 2h, 7d, 1h30m, 1h 30m;"
      + " or Slurm's [D-]HH:MM[:SS]";
  private static final String UNLIMITED_WORD = "unlimited";

  /** Parses "64GiB", "64G", "512MiB", "1024" (bytes); K/M/G/T are binary units like Slurm's. */
  public static long parseSize(String text) {
    Matcher m = SIZE.matcher(text == null ? "" : text.trim());
    if (!m.matches() || (m.group(2).isEmpty() && !m.group(3).isEmpty() && !m.group(3).equalsIgnoreCase("B"))) {
      throw new IllegalArgumentException("'" + text + "' is not a size; use " + SIZE_FORMS);
    }
    int shift = switch (m.group(2).toUpperCase(Locale.ROOT)) {
      case "K" -> 10;
      case "M" -> 20;
      case "G" -> 30;
      case "T" -> 40;
      default -> 0;
    };
    // 18 digits always fit a long; more may not, and would not be a size anyway.
    if (m.group(1).length() > 18 || Long.parseLong(m.group(1)) > (Long.MAX_VALUE >> shift)) {
      throw new IllegalArgumentException("'" + text + "' is too large");
    }
    return Long.parseLong(m.group(1)) << shift;
  }

  /** The largest binary unit that states the size exactly, as parseSize reads it: 64GiB, 1536MiB. */
  public static String formatSize(long bytes) {
    String[] units = {"B", "KiB", "MiB", "GiB", "TiB"};
    int unit = 0;
    long value = bytes;
    while (unit < units.length - 1 && value != 0 && value % 1024 == 0) {
      value /= 1024;
      unit++;
    }
    return value + units[unit];
  }

  /** Parses a duration in the grammar of the class comment, without {@code unlimited}. */
  public static Duration parseDuration(String text) {
    Duration parsed = parse(text);
    if (parsed == null) {
      throw new IllegalArgumentException("'" + text + "' is not a duration; use " + DURATION_FORMS);
    }
    return parsed;
  }

  /** Like {@link #parseDuration}, and {@code unlimited} gives {@link #UNLIMITED}. */
  public static Duration parseDurationOrUnlimited(String text) {
    if (text != null && text.trim().equalsIgnoreCase(UNLIMITED_WORD)) {
      return UNLIMITED;
    }
    Duration parsed = parse(text);
    if (parsed == null) {
      throw new IllegalArgumentException("'" + text + "' is not a duration; use " + DURATION_FORMS
          + "; or " + UNLIMITED_WORD);
    }
    return parsed;
  }

  /** The duration, or null when the text is in none of the forms. */
  private static Duration parse(String text) {
    try {
      return parseOrNull(text);
    } catch (ArithmeticException | NumberFormatException e) { // beyond what a long holds
      throw new IllegalArgumentException("'" + text + "' is too long a duration");
    }
  }

  private static Duration parseOrNull(String text) {
    String s = text == null ? "" : text.trim().toLowerCase(Locale.ROOT);
    Matcher clock = CLOCK.matcher(s);
    if (clock.matches()) {
      return clock(clock);
    }
    Matcher m = PART.matcher(s);
    Duration total = Duration.ZERO;
    int end = 0;
    while (m.find() && m.start() == end) {
      long n = Long.parseLong(m.group(1));
      total = total.plus(switch (m.group(2)) {
        case "ms" -> Duration.ofMillis(n);
        case "s" -> Duration.ofSeconds(n);
        case "m" -> Duration.ofMinutes(n);
        case "h" -> Duration.ofHours(n);
        default -> Duration.ofDays(n);
      });
      end = m.end();
    }
    return end == 0 || end != s.length() ? null : total;
  }

  /** Slurm reads HH:MM:SS with three fields and MM:SS with two, unless a day is given. */
  private static Duration clock(Matcher clock) {
    long first = Long.parseLong(clock.group(2));
    long second = Long.parseLong(clock.group(3));
    if (clock.group(1) == null && clock.group(4) == null) {
      return Duration.ofMinutes(first).plusSeconds(second);
    }
    long days = clock.group(1) == null ? 0 : Long.parseLong(clock.group(1));
    long seconds = clock.group(4) == null ? 0 : Long.parseLong(clock.group(4));
    return Duration.ofDays(days).plusHours(first).plusMinutes(second).plusSeconds(seconds);
  }

  /** Slurm's --time form, rounded up to whole seconds: D-HH:MM:SS. */
  public static String slurmTime(Duration duration) {
    long seconds = (duration.toMillis() + 999) / 1000;
    return String.format(Locale.ROOT, "%d-%02d:%02d:%02d", seconds / 86400, seconds % 86400 / 3600,
        seconds % 3600 / 60, seconds % 60);
  }
}
