package dev.bulletin.runtime.dataport;

import dev.bulletin.bridge.dataport.BulkIo;
import dev.bulletin.bridge.dataport.BulkServe;
import dev.bulletin.bridge.dataport.BulkWire;
import dev.bulletin.runtime.objects.ObjectApi;
import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.ByteChannel;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;

/**
 * One admitted data connection of the bulk port (its ticket already redeemed by the
 * {@link dev.bulletin.bridge.dataport.HeaderGate}), served with blocking I/O on a data thread
 * of the {@link dev.bulletin.bridge.dataport.DataPortServer} (never on an event loop), which
 * closes it after. Wire format: {@link BulkWire}; docs/internals.md.
 */
final class BulkConnection {
  /** What the transfer reads and writes: the socket itself, or TLS over it. */
  private final ByteChannel channel;
  private final ObjectStore store;
  private final BulkIo io;
  /** Runs a stored object's hand-over to its holder on the control plane's loop. */
  private final Executor loop;
  private final ObjectApi objects;
  private final BulkTickets.Ticket ticket;
  private final Runnable progressed;

  BulkConnection(ByteChannel channel, BulkTickets.Ticket ticket, ObjectStore store, BulkIo io,
      Executor loop, ObjectApi objects, Runnable progressed) {
    this.channel = channel;
    this.ticket = ticket;
    this.store = store;
    this.io = io;
    this.loop = loop;
    this.objects = objects;
    this.progressed = progressed;
  }

  void serve() throws IOException {
    if (ticket.direction() == BulkTickets.Direction.PUT) {
      put(ticket);
    } else {
      get(ticket);
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
    long size = BulkServe.get(store, ticket.key(), channel, io, this::progressed);
    if (size >= 0) {
      loop.execute(() -> objects.movedOverDataPort(ticket.caller(), true, size));
    }
  }

  private void progressed() {
    progressed.run();
  }

  private void reply(byte status, String message) throws IOException {
    BulkServe.reply(channel, status, message);
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
}
