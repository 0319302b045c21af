package dev.bulletin.bridge.dataport;

import dev.bulletin.bridge.Mappings;
import dev.bulletin.bridge.ObjectStore;
import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.ReadableByteChannel;
import java.nio.channels.SocketChannel;
import java.nio.channels.WritableByteChannel;
import java.util.List;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32C;
import java.util.zip.Checksum;

/**
 * Moves an object's bytes between a socket and the store with blocking I/O on data threads.
 * Receiving: straight into the upload's file when its pages exist already; into fresh memory,
 * the socket is read into reused direct buffers and written into the file by a helper thread
 * (on tmpfs the first write of a page, allocating it, costs more than the copy).
 * Sending: the file goes out with {@code transferTo} (sendfile: no copy in this process) on a
 * plain socket; through a {@link TlsChannel}, mapped windows of it are encrypted from the page
 * cache.
 */
public final class BulkIo {
  static final int BUFFER_BYTES = 4 << 20;
  /** Buffers per data thread: one being read, one being written, one or two waiting. */
  static final int DEPTH = 4;
  /** Marks the end of a receive for the writer (never written). */
  private static final ByteBuffer END = ByteBuffer.allocate(0);
  /** Mapped at most this much at a time to check a file's CRC (a mapping stays under 2 GiB). */
  private static final long CRC_WINDOW = 1L << 30;
  /** Mapped at a time to send a file through a channel that encrypts it. */
  private static final long MAPPED_SEND_WINDOW = 64L << 20;

  /** Each data thread's receive buffers, reused: fresh memory costs page faults here. */
  private final ThreadLocal<ByteBuffer[]> buffers = ThreadLocal.withInitial(() -> {
    ByteBuffer[] own = new ByteBuffer[DEPTH];
    for (int i = 0; i < DEPTH; i++) {
      own[i] = ByteBuffer.allocateDirect(BUFFER_BYTES);
    }
    return own;
  });
  private final ExecutorService helpers;
  /** Takes the bytes and computes nothing: its value is {@link BulkWire#NO_CRC}. */
  private static final Checksum NO_CHECKSUM = new Checksum() {
    @Override
    public void update(int b) {}

    @Override
    public void update(byte[] b, int off, int len) {}

    @Override
    public void update(ByteBuffer buffer) {
      buffer.position(buffer.limit());
    }

    @Override
    public long getValue() {
      return BulkWire.NO_CRC;
    }

    @Override
    public void reset() {}
  };

  /** @param helpers runs the file side of a transfer (writes, CRC checks) beside the socket */
  public BulkIo(ExecutorService helpers) {
    this.helpers = helpers;
  }

  /**
   * Reads exactly {@code size} bytes into the upload; returns their CRC32C, computed on each
   * slice while it is in cache. Into memory the store has already (a released object's file):
   * straight from the socket into the file's pages. Into fresh memory, through buffers (below).
   */
  public int receive(ReadableByteChannel channel, ObjectStore.Upload upload, long size,
      Runnable progress)
      throws IOException {
    return receive(channel, upload, size, progress, true);
  }

  /**
   * As {@link #receive(ReadableByteChannel, ObjectStore.Upload, long, Runnable)}; without
   * {@code checksum} no CRC is computed and {@link BulkWire#NO_CRC} returned (a TLS connection
   * from a worker's port: see {@link BulkWire}).
   */
  public int receive(ReadableByteChannel channel, ObjectStore.Upload upload, long size,
      Runnable progress, boolean checksum) throws IOException {
    Checksum crc = checksum ? new CRC32C() : NO_CHECKSUM;
    if (upload.receiveInPlace(channel, slice -> {
      crc.update(slice);
      progress.run();
    }, helpers)) {
      return (int) crc.getValue();
    }
    return receiveBuffered(channel, upload, size, crc, progress);
  }

  /**
   * Two threads: this one reads the socket into a free buffer and checks it while a helper
   * writes the previous one into the file, so the copy out of the socket overlaps the tmpfs
   * page allocation of the write (each alone is about as slow as the link).
   */
  private int receiveBuffered(ReadableByteChannel channel, ObjectStore.Upload upload, long size,
      Checksum crc, Runnable progress) throws IOException {
    ByteBuffer[] own = buffers.get();
    BlockingQueue<ByteBuffer> free = new ArrayBlockingQueue<>(own.length);
    BlockingQueue<ByteBuffer> full = new ArrayBlockingQueue<>(own.length + 1);
    free.addAll(List.of(own));
    CompletableFuture<Void> writerDone = new CompletableFuture<>();
    Future<?> writer = helpers.submit(() -> {
      try {
        for (ByteBuffer buffer = full.take(); buffer != END; buffer = full.take()) {
          upload.write(buffer);
          progress.run();
          free.put(buffer);
        }
        return null;
      } finally {
        writerDone.complete(null);
      }
    });
    try {
      long left = size;
      while (left > 0) {
        ByteBuffer buffer = nextFree(free, writer);
        buffer.clear().limit((int) Math.min(buffer.capacity(), left));
        while (buffer.hasRemaining()) {
          if (channel.read(buffer) < 0) {
            throw new EOFException("the data connection closed after " + (size - left
                + buffer.position()) + " of " + size + " bytes");
          }
        }
        left -= buffer.position();
        // The CRC here, not in the writer: the tmpfs writes are the slower side.
        crc.update(buffer.flip().duplicate());
        full.put(buffer);
        progress.run();
      }
      full.put(END);
      writer.get();
      return (int) crc.getValue();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IOException("interrupted while receiving", e);
    } catch (ExecutionException e) {
      throw failure(e.getCause());
    } finally {
      // The buffers go back to this thread only once the writer no longer touches them: it
      // ends at the marker, after the write in progress (never interrupted mid-write).
      full.clear();
      full.offer(END);
      writerDone.join(); // uninterruptible: the buffers must be free before they are reused
    }
  }

  private static ByteBuffer nextFree(BlockingQueue<ByteBuffer> free, Future<?> writer)
      throws InterruptedException, ExecutionException {
    while (true) {
      ByteBuffer buffer = free.poll(100, TimeUnit.MILLISECONDS);
      if (buffer != null) {
        return buffer;
      }
      if (writer.isDone()) {
        writer.get(); // a failed write surfaces here
        throw new IllegalStateException("the writer stopped early");
      }
    }
  }

  private static IOException failure(Throwable cause) {
    if (cause instanceof RuntimeException runtime) {
      throw runtime; // the store's own errors (e.g. ObjectStoreException) keep their type
    }
    return cause instanceof IOException io ? io : new IOException(cause);
  }

  /**
   * Sends {@code size} bytes of the file: with sendfile to a plain socket, else (TLS) from
   * mapped windows.
   */
  public void send(FileChannel file, long size, WritableByteChannel channel, Runnable progress)
      throws IOException {
    if (!(channel instanceof SocketChannel)) {
      sendMapped(file, size, channel, progress);
      return;
    }
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

  /**
   * The copying send: transferTo into a channel that is not a socket would copy through 8 KiB
   * buffers; a window mapped at a time lets the channel take large writes.
   */
  private static void sendMapped(FileChannel file, long size, WritableByteChannel channel,
      Runnable progress) throws IOException {
    for (long at = 0; at < size; at += MAPPED_SEND_WINDOW) {
      MappedByteBuffer window = file.map(FileChannel.MapMode.READ_ONLY, at,
          Math.min(MAPPED_SEND_WINDOW, size - at));
      try {
        while (window.hasRemaining()) {
          int before = window.position();
          window.limit(Math.min(window.capacity(), before + BUFFER_BYTES));
          while (window.hasRemaining()) {
            if (channel.write(window) < 0) {
              throw new EOFException("the data connection closed");
            }
          }
          window.limit(window.capacity());
          progress.run();
        }
      } finally {
        Mappings.unmap(window); // a lingering mapping would keep the file from reuse
      }
    }
  }

  /** The file's CRC32C, computed on a helper thread from a read-only mapping. */
  public CompletableFuture<Integer> crcAsync(FileChannel file, long size) {
    return CompletableFuture.supplyAsync(() -> {
      CRC32C crc = new CRC32C();
      try {
        for (long at = 0; at < size; at += CRC_WINDOW) {
          MappedByteBuffer window = file.map(FileChannel.MapMode.READ_ONLY, at,
              Math.min(CRC_WINDOW, size - at));
          try {
            crc.update(window);
          } finally {
            Mappings.unmap(window); // a lingering mapping would keep the file from reuse
          }
        }
      } catch (IOException e) {
        throw new java.io.UncheckedIOException(e);
      }
      return (int) crc.getValue();
    }, helpers);
  }
}
