package dev.bulletin.bridge.impl;

import dev.bulletin.bridge.Mappings;
import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.ReadableByteChannel;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;
import java.util.function.LongConsumer;

/**
 * Reads a channel straight into a file's pages through read-write mappings: one copy (socket to
 * page) where reading into a buffer and writing it costs two. The file's pages must exist
 * already (a reused file): mapping them still costs a page fault per few pages, so a helper maps
 * the windows ahead of the reader ({@link MappedByteBuffer#load}, whose read faults map a batch
 * of pages each) and the reader finds them mapped.
 */
final class MappedReceive {
  /** Mapped this much at a time: few map calls per object, each far under the 2 GiB limit. */
  static final long WINDOW = 64L << 20;
  /** Handed to the caller's check while it is still in cache. */
  static final int SLICE = 1 << 20;

  private final List<MappedByteBuffer> windows = new ArrayList<>();
  private final long from;
  private final long to;
  /** The reader is done: the prefault stops at its next window. */
  private volatile boolean closed;
  /** Claimed by whichever comes first: the prefault starting, or the reader ending. */
  private final AtomicBoolean prefaultClaimed = new AtomicBoolean();
  private final CompletableFuture<Void> prefaultDone = new CompletableFuture<>();

  /** Maps {@code [from, to)} of the file. */
  MappedReceive(FileChannel file, long from, long to) throws IOException {
    this.from = from;
    this.to = to;
    try {
      for (long at = from; at < to; at += WINDOW) {
        windows.add(file.map(FileChannel.MapMode.READ_WRITE, at, Math.min(WINDOW, to - at)));
      }
    } catch (IOException | RuntimeException e) {
      unmapAll();
      throw e;
    }
  }

  /**
   * Fills every window from {@code source}, handing each filled slice to {@code received};
   * unmaps them all before it returns or throws.
   *
   * @param progress told how many bytes each slice added
   */
  void run(ReadableByteChannel source, Consumer<ByteBuffer> received, Executor prefault,
      LongConsumer progress) throws IOException {
    try {
      prefault.execute(this::prefault);
      long at = from;
      for (MappedByteBuffer window : windows) {
        fill(window, at, source, received, progress);
        at += window.capacity();
      }
    } finally {
      close();
    }
  }

  private void fill(MappedByteBuffer window, long windowAt, ReadableByteChannel source,
      Consumer<ByteBuffer> received, LongConsumer progress)
      throws IOException {
    while (window.hasRemaining()) {
      ByteBuffer slice = window.slice().limit(Math.min(SLICE, window.remaining()));
      while (slice.hasRemaining()) {
        if (source.read(slice) < 0) {
          throw new EOFException("the data connection closed after " + (windowAt
              + window.position() + slice.position()) + " of " + to + " bytes");
        }
      }
      received.accept(slice.flip());
      window.position(window.position() + slice.limit());
      progress.accept(slice.limit());
    }
  }

  private void prefault() {
    if (!prefaultClaimed.compareAndSet(false, true)) {
      return; // the reader is done (or failed) before this started: nothing to touch
    }
    try {
      for (MappedByteBuffer window : windows) {
        if (closed) {
          break;
        }
        window.load();
      }
    } finally {
      prefaultDone.complete(null);
    }
  }

  /** Stops the prefault, waits until it no longer touches a window, then unmaps them all. */
  private void close() {
    closed = true;
    if (!prefaultClaimed.compareAndSet(false, true)) {
      prefaultDone.join(); // unmapping under its feet would crash the JVM (join: uninterruptible)
    }
    unmapAll();
  }

  private void unmapAll() {
    windows.forEach(Mappings::unmap);
    windows.clear();
  }
}
