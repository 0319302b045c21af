package dev.bulletin.bridge.impl;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Whether the machine runs short of memory: less than {@link #LOW_SHARE} of it available
 * ({@code MemAvailable} in {@code /proc/meminfo}). Pre-faulted memory waiting for a write is the
 * first thing to give back then. The file is a parameter so tests can stage any reading.
 */
public final class MemoryPressure {
  /** Below this share of the machine's memory available: give pre-faulted memory back. */
  public static final double LOW_SHARE = 0.10;

  private final Path meminfo;

  public MemoryPressure(Path meminfo) {
    this.meminfo = meminfo;
  }

  public static MemoryPressure ofHost() {
    return new MemoryPressure(Path.of("/proc/meminfo"));
  }

  /** True when available memory is under the low share; false when it cannot be read. */
  public boolean low() {
    long available = -1;
    long total = -1;
    try {
      for (String line : Files.readAllLines(meminfo, StandardCharsets.US_ASCII)) {
        if (line.startsWith("MemAvailable:")) {
          available = kib(line);
        } else if (line.startsWith("MemTotal:")) {
          total = kib(line);
        }
      }
    } catch (IOException | NumberFormatException e) {
      return false; // no reading (not Linux): the file system's free space still bounds fills
    }
    return available >= 0 && total > 0 && available < total * LOW_SHARE;
  }

  private static long kib(String line) {
    return Long.parseLong(line.substring(line.indexOf(':') + 1).trim().split("\\s+")[0]);
  }
}
