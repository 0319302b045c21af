package dev.bulletin.worker.impl;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Map;
import java.util.function.Consumer;

/**
 * Copies one of an executor's output streams to a sink as bytes arrive (so remote prints show up
 * live), and takes out the executor's marker lines, {@code "\x1e<WORD> <text>\n"}, handing
 * {@code <text>} to the handler of {@code <WORD>}. The words (see internals.md):
 * {@code BULLETIN-END <taskId>}, written after each call on both streams: once seen, all of that
 * call's output has been forwarded; {@code BULLETIN-READY <port> <objectId>} on stdout, the
 * announcement of the executor's Py4J callback server, written once before any user code runs;
 * {@code BULLETIN-RETURNED <taskId>} on stderr, the call's function has returned and its result
 * is being encoded and stored; {@code BULLETIN-PREEMPT-SAFE <taskId>} on stderr, a preempted
 * call's checkpoint hooks have returned. A call's own code can write these lines too: each
 * handler only lets it end its own call sooner.
 */
final class OutputPump implements Runnable {

  static final byte RECORD_SEPARATOR = 0x1e;
  static final String SENTINEL_WORD = "BULLETIN-END";
  static final String READY_WORD = "BULLETIN-READY";
  static final String RETURNED_WORD = "BULLETIN-RETURNED";
  static final String PREEMPT_SAFE_WORD = "BULLETIN-PREEMPT-SAFE";
  /** A 0x1e followed by this many bytes with no newline is user output, not a sentinel. */
  private static final int MAX_SENTINEL_LENGTH = 512;

  private final InputStream in;
  private final Consumer<byte[]> sink;
  private final Map<String, Consumer<String>> markers;
  private final Runnable closed;
  private byte[] carry = new byte[0];

  /**
   * @param sink receives output bytes
   * @param markers by marker word, what receives the text after the word of each such line;
   *     a line of another word is output
   * @param closed runs once the stream ends (the process exited)
   */
  OutputPump(InputStream in, Consumer<byte[]> sink, Map<String, Consumer<String>> markers,
      Runnable closed) {
    this.in = in;
    this.sink = sink;
    this.markers = Map.copyOf(markers);
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
      int space = line.indexOf(' ');
      Consumer<String> handler = space < 0 ? null : markers.get(line.substring(0, space));
      if (handler != null) {
        flush(plain);
        handler.accept(line.substring(space + 1));
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
