package dev.bulletin.protocol;

import java.time.Duration;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Sizes and durations as people write them in the YAML file ("64GiB", "90s", "4h", "1h30m") and
 * as Slurm writes walltimes ("04:00:00", "1-12:00:00"). Parsers throw with the accepted forms.
 */
public final class Quantities {
  private Quantities() {}

  private static final Pattern SIZE = Pattern.compile("(\\d+)\\s*([KMGT]?)(i?B?)", Pattern.CASE_INSENSITIVE);
  private static final Pattern UNITS = Pattern.compile("(\\d+)(ms|s|m|h|d)");
  private static final Pattern CLOCK = Pattern.compile("(?:(\\d+)-)?(\\d+):(\\d{1,2})(?::(\\d{1,2}))?");
  static final String SIZE_FORMS = "a number of bytes with a unit: 512MiB, 64GiB, 64G (binary units, as Slurm reads them)";
  static final String DURATION_FORMS = "a number with a unit: 90s, 10m, 2h, 1d, 1h30m; or Slurm's [D-]HH:MM[:SS]";

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
    long value = Long.parseLong(m.group(1));
    if (value > (Long.MAX_VALUE >> shift)) {
      throw new IllegalArgumentException("'" + text + "' is too large");
    }
    return value << shift;
  }

  /** The largest binary unit that states the size exactly: 64GiB, 1536MiB, 100B. */
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

  /** Parses "90s", "10m", "2h", "1d", "1h30m", "500ms", or Slurm's "[D-]HH:MM[:SS]". */
  public static Duration parseDuration(String text) {
    String s = text == null ? "" : text.trim().toLowerCase(Locale.ROOT);
    Matcher clock = CLOCK.matcher(s);
    if (clock.matches()) {
      long days = clock.group(1) == null ? 0 : Long.parseLong(clock.group(1));
      long first = Long.parseLong(clock.group(2));
      long second = Long.parseLong(clock.group(3));
      // Slurm reads HH:MM:SS with three fields and MM:SS with two (unless a day is given).
      if (clock.group(4) != null || clock.group(1) != null) {
        long seconds = clock.group(4) == null ? 0 : Long.parseLong(clock.group(4));
        return Duration.ofDays(days).plusHours(first).plusMinutes(second).plusSeconds(seconds);
      }
      return Duration.ofMinutes(first).plusSeconds(second);
    }
    Matcher m = UNITS.matcher(s);
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
    if (end == 0 || end != s.length()) {
      throw new IllegalArgumentException("'" + text + "' is not a duration; use " + DURATION_FORMS);
    }
    return total;
  }

  /** Slurm's --time form, rounded up to whole seconds: D-HH:MM:SS. */
  public static String slurmTime(Duration duration) {
    long seconds = (duration.toMillis() + 999) / 1000;
    return String.format(Locale.ROOT, "%d-%02d:%02d:%02d", seconds / 86400, seconds % 86400 / 3600,
        seconds % 3600 / 60, seconds % 60);
  }

  /** Short human form for reasons: 90s, 10m, 2h5m. */
  public static String human(Duration duration) {
    long s = Math.max(0, duration.toSeconds());
    if (s < 60) {
      return s + "s";
    }
    StringBuilder out = new StringBuilder();
    if (s >= 86400) {
      out.append(s / 86400).append('d');
    }
    if (s % 86400 >= 3600) {
      out.append(s % 86400 / 3600).append('h');
    }
    if (s % 3600 >= 60) {
      out.append(s % 3600 / 60).append('m');
    }
    if (s % 60 > 0 && s < 3600) {
      out.append(s % 60).append('s');
    }
    return out.toString();
  }
}
