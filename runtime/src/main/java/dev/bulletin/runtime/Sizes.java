package dev.bulletin.runtime;

import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** Parses sizes people write ("16GiB", "512MB", "1024"), with errors that name the option. */
final class Sizes {
  private static final Pattern SIZE = Pattern.compile("(\\d+(?:\\.\\d+)?)\\s*([kmgt]?i?b?)?");

  private Sizes() {}

  static long parse(String option, String text) {
    Matcher m = SIZE.matcher(text.strip().toLowerCase(Locale.ROOT));
    if (!m.matches()) {
      throw new IllegalArgumentException(option + " must be a size like 16GiB, 512MB or a number"
          + " of bytes, got " + text);
    }
    String unit = m.group(2) == null ? "" : m.group(2);
    boolean binary = unit.contains("i") || unit.length() == 1 && !unit.equals("b");
    long base = binary ? 1024 : 1000;
    int power = unit.isEmpty() ? 0 : "bkmgt".indexOf(unit.charAt(0));
    return (long) (Double.parseDouble(m.group(1)) * Math.pow(base, Math.max(0, power)));
  }
}
