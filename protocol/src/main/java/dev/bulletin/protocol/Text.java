package dev.bulletin.protocol;

import java.time.Duration;
import java.util.Locale;

/**
 * Quantities in text for people: reasons, errors, status lines. The one place that decides how a
 * count, a size or a duration reads ({@link Quantities} parses them and writes the exact forms
 * that programs read back, such as Slurm's {@code --time}).
 */
public final class Text {
  private Text() {}

  /** "1 GPU", "3 GPUs", "0 workers": the count and the noun, plural unless the count is one. */
  public static String count(long count, String noun) {
    return count + " " + plural(count, noun);
  }

  /** "1 CPU", "1.5 CPUs", "4 CPUs": a fractional count as {@link #number} writes it. */
  public static String count(double count, String noun) {
    return number(count) + " " + (count == 1 ? noun : noun + "s");
  }

  /** The noun for a count that is written elsewhere ("stopping %d call%s"): "call" or "calls". */
  public static String plural(long count, String noun) {
    return count == 1 ? noun : noun + "s";
  }

  /** A whole number without a decimal point ("2"), any other as Java writes it ("1.5"). */
  public static String number(double value) {
    return value == Math.rint(value) && !Double.isInfinite(value)
        ? Long.toString((long) value) : Double.toString(value);
  }

  /** "100 B", "1.5 GiB": one decimal in the largest binary unit below the size. */
  public static String bytes(long bytes) {
    String[] units = {"B", "KiB", "MiB", "GiB", "TiB"};
    double value = bytes;
    int unit = 0;
    while (value >= 1024 && unit < units.length - 1) {
      value /= 1024;
      unit++;
    }
    return unit == 0 ? bytes + " B" : String.format(Locale.ROOT, "%.1f %s", value, units[unit]);
  }

  /**
   * "45s", "2h", "1h 30m", "2d 3h", "unlimited": the two largest units, rounded down to the
   * second (a reason needs no more; the grammar of {@link Quantities} reads the result back).
   */
  public static String duration(Duration duration) {
    if (duration.compareTo(Quantities.UNLIMITED) >= 0) {
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
