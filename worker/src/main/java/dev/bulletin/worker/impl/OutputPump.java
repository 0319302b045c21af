package dev.bulletin.worker.impl;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.function.Consumer;

/**
 * Copies one of an executor's output streams to a sink as bytes arrive (so remote prints show up
 * live), and recognises the sentinel line {@code "\x1eBULLETIN-END <taskId>\n"} the executor
 * writes after each call: once it is seen, all of that call's output has been forwarded. On
 * stdout it also recognises {@code "\x1eBULLETIN-READY <port> <objectId>\n"}, the executor's
 * announcement of its Py4J callback server, written once before any user code runs; on stderr
 * {@code "\x1eBULLETIN-PREEMPT-SAFE <taskId>\n"}, written once a preempted call's checkpoint
 * hooks have returned.
 */
final class OutputPump implements Runnable {

  static final byte RECORD_SEPARATOR = 0x1e;
  static final String SENTINEL_WORD = "BULLETIN-END ";
  static final String READY_WORD = "BULLETIN-READY ";
  static final String PREEMPT_SAFE_WORD = "BULLETIN-PREEMPT-SAFE ";
  /** A 0x1e followed by this many bytes with no newline is user output, not a sentinel. */
  private static final int MAX_SENTINEL_LENGTH = 512;

  private final InputStream in;
  private final Consumer<byte[]> sink;
  private final Consumer<String> sentinel;
  private final Consumer<String> ready;
  private final Consumer<String> preemptSafe;
  private final Runnable closed;
  private byte[] carry = new byte[0];

  /**
   * @param sink receives output bytes
   * @param sentinel receives the task id of each sentinel line
   * @param ready receives what follows the word of each announcement line
   * @param preemptSafe receives the task id of each preempt-safe line
   * @param closed runs once the stream ends (the process exited)
   */
  OutputPump(InputStream in, Consumer<byte[]> sink, Consumer<String> sentinel,
      Consumer<String> ready, Consumer<String> preemptSafe, Runnable closed) {
    this.in = in;
    this.sink = sink;
    this.sentinel = sentinel;
    this.ready = ready;
    this.preemptSafe = preemptSafe;
    this.closed = closed;
  }

  @Override
  public void run() {
    byte[] buffer = new byte[16 * 1024];
    try {
      int read;
      while ((read = in.read(buffer)) > 0) {
        accept(Arrays.copyOf(buffer, read));
      }
    } catch (IOException ignored) {
      // The process went away; what it wrote before is already forwarded.
    } finally {
      if (carry.length > 0) {
        sink.accept(carry);
      }
      closed.run();
    }
  }

  /** Visible for tests: feeds one chunk as if read from the stream. */
  void accept(byte[] chunk) {
    byte[] data = concat(carry, chunk);
    carry = new byte[0];
    ByteArrayOutputStream plain = new ByteArrayOutputStream(data.length);
    int i = 0;
    while (i < data.length) {
      if (data[i] != RECORD_SEPARATOR) {
        plain.write(data[i++]);
        continue;
      }
      int newline = indexOf(data, (byte) '\n', i + 1);
      if (newline < 0) {
        if (data.length - i <= MAX_SENTINEL_LENGTH) {
          carry = Arrays.copyOfRange(data, i, data.length); // may complete in the next chunk
          break;
        }
        plain.write(data[i++]);
        continue;
      }
      String line = new String(data, i + 1, newline - i - 1, StandardCharsets.UTF_8);
      if (line.startsWith(SENTINEL_WORD)) {
        flush(plain);
        sentinel.accept(line.substring(SENTINEL_WORD.length()));
        i = newline + 1;
      } else if (line.startsWith(READY_WORD)) {
        flush(plain);
        ready.accept(line.substring(READY_WORD.length()));
        i = newline + 1;
      } else if (line.startsWith(PREEMPT_SAFE_WORD)) {
        flush(plain);
        preemptSafe.accept(line.substring(PREEMPT_SAFE_WORD.length()));
        i = newline + 1;
      } else {
        plain.write(data[i++]);
      }
    }
    flush(plain);
  }

  private void flush(ByteArrayOutputStream plain) {
    if (plain.size() > 0) {
      sink.accept(plain.toByteArray());
      plain.reset();
    }
  }

  private static int indexOf(byte[] data, byte value, int from) {
    for (int i = from; i < data.length; i++) {
      if (data[i] == value) {
        return i;
      }
    }
    return -1;
  }

  private static byte[] concat(byte[] a, byte[] b) {
    if (a.length == 0) {
      return b;
    }
    byte[] out = Arrays.copyOf(a, a.length + b.length);
    System.arraycopy(b, 0, out, a.length, b.length);
    return out;
  }
}
