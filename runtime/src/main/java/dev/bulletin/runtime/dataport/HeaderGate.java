package dev.bulletin.runtime.dataport;

import dev.bulletin.bridge.dataport.BulkWire;
import dev.bulletin.bridge.dataport.TlsChannel;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ByteChannel;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;
import java.util.function.LongSupplier;
import java.util.logging.Level;
import java.util.logging.Logger;
import javax.net.ssl.SSLContext;

/**
 * Accepts data connections and reads their header (magic, version, ticket) without blocking a
 * thread per connection: one selector thread holds every connection that has not shown a valid
 * ticket yet. Only a redeemed ticket earns a data thread, so idle or slow connections cannot
 * hold the port shut. Pending connections are capped per address and in all; past a cap, the
 * oldest pending one is closed (not the newcomer: a real client on a flooded address must
 * still get in), and each must complete its header within a short deadline.
 *
 * <p>With TLS the ticket travels inside the TLS session, so the gate runs the handshake too,
 * without blocking: each pending connection has a non-blocking {@link TlsChannel}, driven by
 * the selector's read and write readiness, under the same caps and the same deadline (the
 * handshake counts against it). The handshake's CPU work (a key exchange and a signature,
 * about a millisecond) runs on the gate thread: simple, and a connection that has not shown a
 * ticket still costs no data thread.
 */
final class HeaderGate implements Runnable {
  /** Pending (header not yet read) connections one address may hold; the oldest goes first. */
  static final int PENDING_PER_ADDRESS = 64;
  /** Pending connections in all. */
  static final int PENDING_TOTAL = 2048;
  private static final int HEADER_BYTES = 8 + BulkTickets.TICKET_BYTES;
  private static final Logger LOG = Logger.getLogger(HeaderGate.class.getName());

  /** Takes a connection whose ticket was redeemed, in blocking mode, off the gate's thread. */
  interface Admission {
    /**
     * @param socket the connection (its options; closing it cuts the transfer)
     * @param stream what to read and write: the socket itself, or TLS over it
     */
    void admit(SocketChannel socket, ByteChannel stream, BulkTickets.Ticket ticket);
  }

  /** A connection whose header is still arriving. */
  private static final class Pending {
    final SocketChannel channel;
    /** The socket itself, or TLS over it. */
    final ByteChannel stream;
    final InetAddress address;
    final ByteBuffer header = ByteBuffer.allocate(HEADER_BYTES);
    final long deadlineNanos;

    Pending(SocketChannel channel, ByteChannel stream, InetAddress address, long deadlineNanos) {
      this.channel = channel;
      this.stream = stream;
      this.address = address;
      this.deadlineNanos = deadlineNanos;
    }
  }

  private final ServerSocketChannel server;
  private final Selector selector;
  private final BulkTickets tickets;
  /** Null: plaintext connections. */
  private final SSLContext tls;
  private final Admission admit;
  private final long headerNanos;
  private final LongSupplier nanoTime;
  private final Map<InetAddress, ArrayDeque<Pending>> pendingByAddress = new HashMap<>();
  private final ArrayDeque<Pending> pendingInOrder = new ArrayDeque<>();

  /**
   * @param tls the server's TLS context; null for plaintext connections
   * @param admit takes a connection whose ticket was redeemed (it must not block the gate)
   */
  HeaderGate(ServerSocketChannel server, SSLContext tls, BulkTickets tickets, long headerNanos,
      LongSupplier nanoTime, Admission admit) throws IOException {
    this.server = server;
    this.tls = tls;
    this.tickets = tickets;
    this.headerNanos = headerNanos;
    this.nanoTime = nanoTime;
    this.admit = admit;
    this.selector = Selector.open();
    server.configureBlocking(false);
    server.register(selector, SelectionKey.OP_ACCEPT);
  }

  @Override
  public void run() {
    try {
      while (server.isOpen()) {
        selector.select(250);
        Iterator<SelectionKey> ready = selector.selectedKeys().iterator();
        while (ready.hasNext()) {
          SelectionKey key = ready.next();
          ready.remove();
          if (!key.isValid()) {
            continue;
          }
          if (key.isAcceptable()) {
            acceptAll();
          } else if (key.isReadable() || key.isWritable()) {
            read(key, (Pending) key.attachment());
          }
        }
        closeOverdue();
      }
    } catch (ClosedChannelException | java.nio.channels.ClosedSelectorException stopped) {
      // The port closed.
    } catch (IOException e) {
      LOG.log(Level.WARNING, "the data port stopped accepting connections: " + e, e);
    } finally {
      pendingInOrder.forEach(p -> close(p.channel));
      try {
        selector.close();
      } catch (IOException ignored) {
        // Stopping anyway.
      }
    }
  }

  /** Stops the gate (the server channel is closed by its owner). */
  void wakeup() {
    selector.wakeup();
  }

  /** Connections waiting for their header now (for tests and status). */
  int pendingCount() {
    return pendingInOrder.size();
  }

  private void acceptAll() throws IOException {
    SocketChannel channel;
    while ((channel = server.accept()) != null) {
      InetAddress address = ((InetSocketAddress) channel.getRemoteAddress()).getAddress();
      channel.configureBlocking(false);
      ByteChannel stream = tls == null ? channel : TlsChannel.server(channel, tls);
      Pending pending = new Pending(channel, stream, address,
          nanoTime.getAsLong() + headerNanos);
      ArrayDeque<Pending> ofAddress = pendingByAddress.computeIfAbsent(address,
          a -> new ArrayDeque<>());
      if (ofAddress.size() >= PENDING_PER_ADDRESS) {
        drop(ofAddress.peekFirst());
      }
      if (pendingInOrder.size() >= PENDING_TOTAL) {
        drop(pendingInOrder.peekFirst());
      }
      ofAddress.addLast(pending);
      pendingInOrder.addLast(pending);
      channel.register(selector, SelectionKey.OP_READ, pending);
    }
  }

  /** Reads what arrived of the header (with TLS: runs the handshake as far as it can go). */
  private void read(SelectionKey key, Pending pending) {
    try {
      if (pending.stream.read(pending.header) < 0) {
        drop(pending);
        return;
      }
      if (pending.stream instanceof TlsChannel tlsStream) {
        // A handshake message the socket did not take yet: wait until it can.
        key.interestOps(tlsStream.hasPendingOutput()
            ? SelectionKey.OP_READ | SelectionKey.OP_WRITE : SelectionKey.OP_READ);
      }
    } catch (IOException e) { // with TLS also a failed handshake (a client that distrusts us)
      LOG.log(Level.FINE, "data connection from " + pending.address + " dropped: " + e, e);
      drop(pending);
      return;
    }
    if (pending.header.hasRemaining()) {
      return;
    }
    forget(pending);
    key.cancel();
    ByteBuffer header = pending.header.flip();
    if (header.getInt() != BulkWire.MAGIC || header.getInt() != BulkWire.VERSION) {
      refuse(pending, "not a bulletin data connection of version " + BulkWire.VERSION
          + " (upgrade the client)");
      return;
    }
    byte[] id = new byte[BulkTickets.TICKET_BYTES];
    header.get(id);
    BulkTickets.Ticket ticket;
    try {
      ticket = tickets.redeem(id);
    } catch (IllegalArgumentException refused) {
      refuse(pending, refused.getMessage());
      return;
    }
    try {
      selector.selectNow(); // deregisters the cancelled key, so the channel may block again
      pending.channel.configureBlocking(true);
    } catch (IOException e) {
      close(pending.channel);
      return;
    }
    admit.admit(pending.channel, pending.stream, ticket);
  }

  /** Says why, best effort (a short reply fits the socket buffer), and closes. */
  private static void refuse(Pending pending, String message) {
    byte[] text = message.getBytes(StandardCharsets.UTF_8);
    try {
      pending.stream.write(ByteBuffer.allocate(5 + text.length).put(BulkWire.REFUSED)
          .putInt(text.length).put(text).flip());
    } catch (IOException ignored) {
      // The client left; nothing to say.
    }
    close(pending.channel);
  }

  private void closeOverdue() {
    long now = nanoTime.getAsLong();
    while (!pendingInOrder.isEmpty() && now - pendingInOrder.peekFirst().deadlineNanos > 0) {
      drop(pendingInOrder.peekFirst());
    }
  }

  private void drop(Pending pending) {
    forget(pending);
    close(pending.channel);
  }

  private void forget(Pending pending) {
    pendingInOrder.remove(pending);
    ArrayDeque<Pending> ofAddress = pendingByAddress.get(pending.address);
    if (ofAddress != null) {
      ofAddress.remove(pending);
      if (ofAddress.isEmpty()) {
        pendingByAddress.remove(pending.address);
      }
    }
  }

  private static void close(SocketChannel channel) {
    try {
      channel.close();
    } catch (IOException ignored) {
      // Closing anyway.
    }
  }
}
