package dev.bulletin.bridge.dataport;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.ByteChannel;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * The serving side of a data-port GET, shared by the runtime's port and each worker's own
 * ({@link BulkWire}: u8 status, u64 size, the file's bytes with sendfile, u32 CRC32C).
 */
public final class BulkServe {
  private BulkServe() {}

  /**
   * Sends a stored object: leased (read back if spilled, kept in memory while sent), its CRC
   * computed beside the send. A store that cannot give it is answered {@link BulkWire#FAILED}.
   *
   * @return the bytes sent; -1 when the store refused
   */
  public static long get(ObjectStore store, ObjectKey key, ByteChannel channel, BulkIo io,
      Runnable progressed) throws IOException {
    return get(store, key, channel, io, progressed, true);
  }

  /**
   * As {@link #get(ObjectStore, ObjectKey, ByteChannel, BulkIo, Runnable)}; without
   * {@code checksum} the trailer is {@link BulkWire#NO_CRC} and the file is read only once, by
   * the send: for a TLS connection of a worker's port, whose AEAD records already authenticate
   * every byte from this process to the reader's (the CRC pass cost about a quarter of a CPU
   * second per GiB).
   */
  public static long get(ObjectStore store, ObjectKey key, ByteChannel channel, BulkIo io,
      Runnable progressed, boolean checksum) throws IOException {
    ObjectStore.Lease lease;
    try {
      lease = store.lease(List.of(key));
    } catch (RuntimeException e) {
      reply(channel, BulkWire.FAILED, e.getMessage());
      return -1;
    }
    try (lease; FileChannel file = FileChannel.open(lease.path(key), StandardOpenOption.READ)) {
      long size = file.size();
      CompletableFuture<Integer> crc = checksum ? io.crcAsync(file, size)
          : CompletableFuture.completedFuture(BulkWire.NO_CRC);
      writeFully(channel, ByteBuffer.allocate(9).put(BulkWire.OK).putLong(size).flip());
      io.send(file, size, channel, progressed);
      writeFully(channel, ByteBuffer.allocate(4).putInt(crc.join()).flip());
      return size;
    }
  }

  /** A status with its message: u8 status, u32 length, UTF-8. */
  public static void reply(ByteChannel channel, byte status, String message) throws IOException {
    byte[] text = String.valueOf(message).getBytes(StandardCharsets.UTF_8);
    writeFully(channel, ByteBuffer.allocate(5 + text.length).put(status).putInt(text.length)
        .put(text).flip());
  }

  public static void writeFully(ByteChannel channel, ByteBuffer buffer) throws IOException {
    while (buffer.hasRemaining()) {
      channel.write(buffer);
    }
  }
}
