package dev.bulletin.runtime.impl;

import dev.bulletin.bridge.ObjectStore;
import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.SocketChannel;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.zip.CRC32C;

/**
 * Moves an object's bytes between a socket and the store with blocking I/O on data threads.
 * Receiving: the socket is read into a reused direct buffer and written into the upload's file
 * at its position; on tmpfs the first write of a page (allocating it) costs more than the copy.
 * Sending: the file goes out with {@code transferTo} (sendfile: no copy in this process).
 */
final class BulkIo {
  static final int BUFFER_BYTES = 8 << 20;
  /** Mapped at most this much at a time to check a file's CRC (a mapping stays under 2 GiB). */
  private static final long CRC_WINDOW = 1L << 30;

  private final ThreadLocal<ByteBuffer> buffers =
      ThreadLocal.withInitial(() -> ByteBuffer.allocateDirect(BUFFER_BYTES));
  private final ExecutorService helpers;

  /** @param helpers runs CRC checks beside a send */
  BulkIo(ExecutorService helpers) {
    this.helpers = helpers;
  }

  /** Reads exactly {@code size} bytes into the upload; returns their CRC32C. */
  int receive(SocketChannel channel, ObjectStore.Upload upload, long size, Runnable progress)
      throws IOException {
    ByteBuffer buffer = buffers.get();
    CRC32C crc = new CRC32C();
    long left = size;
    while (left > 0) {
      buffer.clear().limit((int) Math.min(buffer.capacity(), left));
      while (buffer.hasRemaining()) {
        if (channel.read(buffer) < 0) {
          throw new EOFException("the data connection closed after " + (size - left
              + buffer.position()) + " of " + size + " bytes");
        }
      }
      buffer.flip();
      left -= buffer.remaining();
      crc.update(buffer.duplicate());
      upload.write(buffer);
      progress.run();
    }
    return (int) crc.getValue();
  }

  /** Sends {@code size} bytes of the file with sendfile. */
  void send(FileChannel file, long size, SocketChannel channel, Runnable progress)
      throws IOException {
    long position = 0;
    while (position < size) {
      long sent = file.transferTo(position, Math.min(size - position, BUFFER_BYTES), channel);
      if (sent <= 0 && !channel.isOpen()) {
        throw new EOFException("the data connection closed");
      }
      position += sent;
      progress.run();
    }
  }

  /** The file's CRC32C, computed on a helper thread from a read-only mapping. */
  CompletableFuture<Integer> crcAsync(FileChannel file, long size) {
    return CompletableFuture.supplyAsync(() -> {
      CRC32C crc = new CRC32C();
      try {
        for (long at = 0; at < size; at += CRC_WINDOW) {
          crc.update(file.map(FileChannel.MapMode.READ_ONLY, at, Math.min(CRC_WINDOW,
              size - at)));
        }
      } catch (IOException e) {
        throw new java.io.UncheckedIOException(e);
      }
      return (int) crc.getValue();
    }, helpers);
  }
}
