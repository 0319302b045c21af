package dev.bulletin.runtime.scheduler.policy;

import java.time.Duration;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** Durations as people write them in the config ("90s", "30m", "2h", "7d", "1h30m"). */
public final class Durations {
  /** Stands for "no limit"; far enough to never matter, near enough that instants can add it. */
  public static final Duration UNLIMITED = Duration.ofDays(365L * 1000);

  private static final Pattern PART = Pattern.compile("(\\d+)(d|h|m|s)");

  private Durations() {}

  /** Parses {@code text}; errors name {@code field} and the accepted forms. */
  public static Duration parse(String field, String text) {
    String compact = text == null ? "" : text.replace(" ", "").toLowerCase(java.util.Locale.ROOT);
    if (compact.equals("unlimited")) {
      return UNLIMITED;
    }
    Matcher matcher = PART.matcher(compact);
    Duration total = Duration.ZERO;
    int end = 0;
    while (matcher.find() && matcher.start() == end) {
      long value = Long.parseLong(matcher.group(1));
      total = total.plus(switch (matcher.group(2)) {
        case "d" -> Duration.ofDays(value);
        case "h" -> Duration.ofHours(value);
        case "m" -> Duration.ofMinutes(value);
        default -> Duration.ofSeconds(value);
      });
      end = matcher.end();
    }
    if (compact.isEmpty() || end != compact.length()) {
      throw new IllegalArgumentException(field + ": '" + text + "' is not a duration (write e.g."
          + " 90s, 30m, 2h, 7d, 1h30m or unlimited)");
    }
    return total;
  }

  /** "2h", "1h 30m", "45s", "unlimited". */
  public static String format(Duration duration) {
    if (duration.compareTo(UNLIMITED) >= 0) {
      return "unlimited";
    }
    long seconds = Math.max(0, duration.toSeconds());
    if (seconds == 0) {
      return "0s";
    }
    StringBuilder text = new StringBuilder();
    long[] units = {86400, 3600, 60, 1};
    String[] names = {"d", "h", "m", "s"};
    int parts = 0;
    for (int i = 0; i < units.length && parts < 2; i++) {
      long value = seconds / units[i];
      if (value > 0) {
        text.append(text.length() > 0 ? " " : "").append(value).append(names[i]);
        seconds -= value * units[i];
        parts++;
      } else if (parts > 0) {
        break;
      }
    }
    return text.toString();
  }
}
