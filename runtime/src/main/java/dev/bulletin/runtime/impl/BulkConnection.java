package dev.bulletin.runtime.impl;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * One data connection of the bulk port, served with blocking I/O on a data thread (never on an
 * event loop). Wire format (big-endian), see docs/internals.md:
 *
 * <pre>
 * client: "BLKD" u32 version=1, 32-byte ticket
 * runtime: u8 status (0 = go on; else u32 length + UTF-8 message, then it closes)
 * PUT  client: the object's bytes, u32 CRC32C of them; runtime: u8 status, u32 length, message
 * GET  runtime: u64 size, the file's bytes (sendfile), u32 CRC32C of them
 * </pre>
 */
final class BulkConnection implements Runnable {
  static final int MAGIC = 0x424C4B44; // "BLKD"
  static final int VERSION = 1;
  static final byte OK = 0;
  /** The ticket is unknown, used, expired, or the header is not ours: do not retry it. */
  static final byte REFUSED = 1;
  /** The bytes failed their CRC32C check: nothing was stored, send them again. */
  static final byte CORRUPT = 2;
  /** The store could not take or give the object; the message says why. */
  static final byte FAILED = 3;
  private static final Logger LOG = Logger.getLogger(BulkConnection.class.getName());

  private final SocketChannel channel;
  private final BulkTickets tickets;
  private final ObjectStore store;
  private final BulkIo io;
  /** Runs a stored object's hand-over to its holder on the control plane's loop. */
  private final Executor loop;
  private final ObjectApi objects;
  private final java.util.function.Consumer<BulkConnection> onClose;
  private final long openedNanos = System.nanoTime();
  private volatile long lastProgressNanos = openedNanos;
  /** Set once the ticket was accepted; before that, only a short wait is allowed. */
  private volatile boolean admitted;

  BulkConnection(SocketChannel channel, BulkTickets tickets, ObjectStore store, BulkIo io,
      Executor loop, ObjectApi objects, java.util.function.Consumer<BulkConnection> onClose) {
    this.channel = channel;
    this.tickets = tickets;
    this.store = store;
    this.io = io;
    this.loop = loop;
    this.objects = objects;
    this.onClose = onClose;
  }

  /**
   * Whether the connection should be cut: it sent no valid header within {@code headerNanos}
   * (so idle connections cannot hold the few data threads), or moved nothing for
   * {@code stallNanos}.
   */
  boolean stalled(long now, long headerNanos, long stallNanos) {
    return admitted ? now - lastProgressNanos > stallNanos : now - openedNanos > headerNanos;
  }

  /** Cuts a stalled connection; its data thread sees the close and cleans up. */
  void abort() {
    try {
      channel.close();
    } catch (IOException ignored) {
      // Closing anyway.
    }
  }

  @Override
  public void run() {
    try (channel) {
      channel.socket().setTcpNoDelay(true);
      ByteBuffer header = readFully(ByteBuffer.allocate(8 + BulkTickets.TICKET_BYTES)).flip();
      if (header.getInt() != MAGIC || header.getInt() != VERSION) {
        reply(REFUSED, "not a bulletin data connection of version " + VERSION
            + " (upgrade the client)");
        return;
      }
      byte[] id = new byte[BulkTickets.TICKET_BYTES];
      header.get(id);
      BulkTickets.Ticket ticket;
      try {
        ticket = tickets.redeem(id);
      } catch (IllegalArgumentException refused) {
        reply(REFUSED, refused.getMessage());
        return;
      }
      admitted = true;
      if (ticket.direction() == BulkTickets.Direction.PUT) {
        put(ticket);
      } else {
        get(ticket);
      }
    } catch (IOException | RuntimeException e) {
      LOG.log(Level.FINE, "bulk connection ended: " + e, e);
    } finally {
      onClose.accept(this);
    }
  }

  private void put(BulkTickets.Ticket ticket) throws IOException {
    ObjectStore.Upload upload = ticket.upload();
    ObjectKey key = ticket.key();
    try (upload) { // a cut connection or a bad CRC leaves nothing: close() frees the room
      channel.write(ByteBuffer.wrap(new byte[] {OK}));
      int crc = io.receive(channel, upload, ticket.size(), this::progressed);
      int sent = readFully(ByteBuffer.allocate(4)).flip().getInt();
      if (sent != crc) {
        reply(CORRUPT, "upload of " + key.id() + " failed its CRC32C check; nothing was stored,"
            + " send it again");
        return;
      }
      ObjectKey stored;
      try {
        stored = upload.commit();
      } catch (RuntimeException e) {
        reply(FAILED, e.getMessage());
        return;
      }
      // The session's hold is taken on the loop before the client hears OK: a release it sends
      // after its next Submit then finds the hold.
      CompletableFuture<Void> held = new CompletableFuture<>();
      loop.execute(() -> {
        objects.keep(ticket.caller(), stored);
        objects.movedOverDataPort(ticket.caller(), false, ticket.size());
        held.complete(null);
      });
      held.get(30, TimeUnit.SECONDS);
      reply(OK, "");
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (java.util.concurrent.ExecutionException | java.util.concurrent.TimeoutException e) {
      reply(FAILED, "the runtime did not take over object " + key.id() + ": " + e);
    }
  }

  private void get(BulkTickets.Ticket ticket) throws IOException {
    ObjectKey key = ticket.key();
    ObjectStore.Lease lease;
    try {
      lease = store.lease(List.of(key)); // read back if spilled; kept in memory while sent
    } catch (RuntimeException e) {
      reply(FAILED, e.getMessage());
      return;
    }
    try (lease; FileChannel file = FileChannel.open(lease.path(key), StandardOpenOption.READ)) {
      long size = file.size();
      CompletableFuture<Integer> crc = io.crcAsync(file, size);
      channel.write(ByteBuffer.allocate(9).put(OK).putLong(size).flip());
      io.send(file, size, channel, this::progressed);
      writeFully(ByteBuffer.allocate(4).putInt(crc.join()).flip());
      loop.execute(() -> objects.movedOverDataPort(ticket.caller(), true, size));
    }
  }

  private void progressed() {
    lastProgressNanos = System.nanoTime();
  }

  private void reply(byte status, String message) throws IOException {
    byte[] text = message.getBytes(StandardCharsets.UTF_8);
    writeFully(ByteBuffer.allocate(5 + text.length).put(status).putInt(text.length).put(text)
        .flip());
  }

  private ByteBuffer readFully(ByteBuffer buffer) throws IOException {
    while (buffer.hasRemaining()) {
      if (channel.read(buffer) < 0) {
        throw new EOFException("the client closed the data connection");
      }
      progressed();
    }
    return buffer;
  }

  private void writeFully(ByteBuffer buffer) throws IOException {
    while (buffer.hasRemaining()) {
      channel.write(buffer);
    }
  }
}
