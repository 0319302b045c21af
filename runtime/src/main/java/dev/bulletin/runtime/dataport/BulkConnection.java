package dev.bulletin.runtime.dataport;

import dev.bulletin.bridge.dataport.BulkIo;
import dev.bulletin.bridge.dataport.BulkWire;
import dev.bulletin.runtime.objects.ObjectApi;
import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.ByteChannel;
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
 * One admitted data connection of the bulk port (its ticket already redeemed by the
 * {@link HeaderGate}), served with blocking I/O on a data thread (never on an event loop).
 * Wire format: {@link BulkWire}; docs/internals.md.
 */
final class BulkConnection implements Runnable {
  private static final Logger LOG = Logger.getLogger(BulkConnection.class.getName());

  private final SocketChannel socket;
  /** What the transfer reads and writes: the socket itself, or TLS over it. */
  private final ByteChannel channel;
  private final ObjectStore store;
  private final BulkIo io;
  /** Runs a stored object's hand-over to its holder on the control plane's loop. */
  private final Executor loop;
  private final ObjectApi objects;
  private final java.util.function.Consumer<BulkConnection> onClose;
  private final BulkTickets.Ticket ticket;
  private volatile long lastProgressNanos = System.nanoTime();

  BulkConnection(SocketChannel socket, ByteChannel channel, BulkTickets.Ticket ticket,
      ObjectStore store, BulkIo io, Executor loop, ObjectApi objects,
      java.util.function.Consumer<BulkConnection> onClose) {
    this.socket = socket;
    this.channel = channel;
    this.ticket = ticket;
    this.store = store;
    this.io = io;
    this.loop = loop;
    this.objects = objects;
    this.onClose = onClose;
  }

  /**
   * Whether the connection moved nothing for {@code stallNanos} (counted from its admission:
   * only connections with a redeemed ticket get here, see {@link HeaderGate}).
   */
  boolean stalled(long now, long stallNanos) {
    return now - lastProgressNanos > stallNanos;
  }

  /** Cuts a stalled connection; its data thread sees the close and cleans up. */
  void abort() {
    try {
      socket.close();
    } catch (IOException ignored) {
      // Closing anyway.
    }
  }

  @Override
  public void run() {
    try (socket) {
      socket.socket().setTcpNoDelay(true);
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
      channel.write(ByteBuffer.wrap(new byte[] {BulkWire.OK}));
      int crc = io.receive(channel, upload, ticket.size(), this::progressed);
      int sent = readFully(ByteBuffer.allocate(4)).flip().getInt();
      if (sent != crc) {
        reply(BulkWire.CORRUPT, "upload of " + key.id() + " failed its CRC32C check; nothing was stored,"
            + " send it again");
        return;
      }
      ObjectKey stored;
      try {
        stored = upload.commit();
      } catch (RuntimeException e) {
        reply(BulkWire.FAILED, e.getMessage());
        return;
      }
      // The session's hold is taken on the loop, and journaled, before the client hears
      // BulkWire.OK: a release it sends after its next Submit then finds the hold, and a
      // restart keeps the object for it.
      CompletableFuture<Void> held = new CompletableFuture<>();
      loop.execute(() -> {
        CompletableFuture<Void> kept = objects.keepJournaled(ticket.caller(), stored);
        objects.movedOverDataPort(ticket.caller(), false, ticket.size());
        kept.whenComplete((ignored, error) -> {
          if (error == null) {
            held.complete(null);
          } else {
            held.completeExceptionally(error);
          }
        });
      });
      held.get(30, TimeUnit.SECONDS);
      reply(BulkWire.OK, "");
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (java.util.concurrent.ExecutionException e) { // the journal could not keep the hold
      reply(BulkWire.FAILED, "the runtime did not take over object " + key.id() + ": "
          + e.getCause().getMessage());
    } catch (java.util.concurrent.TimeoutException e) {
      reply(BulkWire.FAILED, "the runtime did not take over object " + key.id() + ": " + e);
    }
  }

  private void get(BulkTickets.Ticket ticket) throws IOException {
    ObjectKey key = ticket.key();
    ObjectStore.Lease lease;
    try {
      lease = store.lease(List.of(key)); // read back if spilled; kept in memory while sent
    } catch (RuntimeException e) {
      reply(BulkWire.FAILED, e.getMessage());
      return;
    }
    try (lease; FileChannel file = FileChannel.open(lease.path(key), StandardOpenOption.READ)) {
      long size = file.size();
      CompletableFuture<Integer> crc = io.crcAsync(file, size);
      channel.write(ByteBuffer.allocate(9).put(BulkWire.OK).putLong(size).flip());
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
