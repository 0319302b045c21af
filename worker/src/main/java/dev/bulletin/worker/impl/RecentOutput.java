package dev.bulletin.worker.impl;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/** Keeps the last bytes written, to quote in an error. Thread-safe. */
final class RecentOutput {
  private final int capacity;
  private byte[] bytes = new byte[0];

  RecentOutput(int capacity) {
    this.capacity = capacity;
  }

  synchronized void append(byte[] data) {
    byte[] joined = Arrays.copyOf(bytes, bytes.length + data.length);
    System.arraycopy(data, 0, joined, bytes.length, data.length);
    bytes = joined.length <= capacity ? joined
        : Arrays.copyOfRange(joined, joined.length - capacity, joined.length);
  }

  synchronized String text() {
    return new String(bytes, StandardCharsets.UTF_8);
  }
}
