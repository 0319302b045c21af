package dev.bulletin.runtime.scheduler;

import java.util.Locale;

/** Human-readable quantities for reasons and status. */
public final class Formats {
  private Formats() {}

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

  public static String cpus(double cpus) {
    return cpus == Math.rint(cpus) ? Long.toString((long) cpus) : Double.toString(cpus);
  }
}
