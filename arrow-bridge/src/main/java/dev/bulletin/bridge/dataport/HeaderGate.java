package dev.bulletin.bridge.dataport;

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
 *
 * <p>The same gate serves the runtime's data port (random single-use tickets of version 1) and
 * each worker's own port (tickets the head signed, version 2, length-prefixed): what a ticket
 * is, and whether it is good, is the {@link Redeemer}'s business.
 *
 * @param <T> what a redeemed ticket allows
 */
public final class HeaderGate<T> implements Runnable {
  /** Pending (header not yet read) connections one address may hold; the oldest goes first. */
  public static final int PENDING_PER_ADDRESS = 64;
  /** Pending connections in all. */
  public static final int PENDING_TOTAL = 2048;
  /** The longest length-prefixed ticket a client may send. */
  public static final int MAX_TICKET_BYTES = 4096;
  /** Magic and version, before the ticket. */
  private static final int PREFIX_BYTES = 8;
  private static final Logger LOG = Logger.getLogger(HeaderGate.class.getName());

  /** Takes a connection whose ticket was redeemed, in blocking mode, off the gate's thread. */
  public interface Admission<T> {
    /**
     * @param socket the connection (its options; closing it cuts the transfer)
     * @param stream what to read and write: the socket itself, or TLS over it
     */
    void admit(SocketChannel socket, ByteChannel stream, T ticket);
  }

  /** Knows this port's tickets: their length per header version, and whether one is good. */
  public interface Redeemer<T> {
    /**
     * How many ticket bytes follow magic and version; {@link #LENGTH_PREFIXED} when a u32
     * length comes first.
     *
     * @throws IllegalArgumentException saying why this port does not take that version
     */
    int ticketBytes(int version);

    /** @throws IllegalArgumentException saying why the ticket is refused */
    T redeem(int version, byte[] ticket);
  }

  /** {@link Redeemer#ticketBytes}: the ticket's length travels before it, as a u32. */
  public static final int LENGTH_PREFIXED = -1;

  /** A connection whose header is still arriving. */
  private static final class Pending {
    final SocketChannel channel;
    /** The socket itself, or TLS over it. */
    final ByteChannel stream;
    final InetAddress address;
    /** What is being read now: magic and version, then a length (maybe), then the ticket. */
    ByteBuffer header = ByteBuffer.allocate(PREFIX_BYTES);
    int version = -1;
    boolean lengthRead;
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
  private final Redeemer<T> tickets;
  /** Null: plaintext connections. */
  private final TlsEngines tls;
  private final Admission<T> admit;
  private final long headerNanos;
  private final LongSupplier nanoTime;
  private final Map<InetAddress, ArrayDeque<Pending>> pendingByAddress = new HashMap<>();
  private final ArrayDeque<Pending> pendingInOrder = new ArrayDeque<>();

  /**
   * @param tls the server's TLS engines; null for plaintext connections
   * @param admit takes a connection whose ticket was redeemed (it must not block the gate)
   */
  public HeaderGate(ServerSocketChannel server, TlsEngines tls, Redeemer<T> tickets,
      long headerNanos, LongSupplier nanoTime, Admission<T> admit) throws IOException {
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
  public void wakeup() {
    selector.wakeup();
  }

  /** Connections waiting for their header now (for tests and status). */
  public int pendingCount() {
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
    byte[] ticketBytes;
    try {
      ticketBytes = nextPart(pending);
    } catch (IllegalArgumentException refused) {
      forget(pending);
      key.cancel();
      refuse(pending, refused.getMessage());
      return;
    }
    if (ticketBytes == null) {
      read(key, pending); // the next part may have arrived with this one
      return;
    }
    forget(pending);
    key.cancel();
    T ticket;
    try {
      ticket = tickets.redeem(pending.version, ticketBytes);
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

  /**
   * A part of the header is complete: moves on to the next one (null), or returns the ticket.
   *
   * @throws IllegalArgumentException when the header is not one this port takes
   */
  private byte[] nextPart(Pending pending) {
    ByteBuffer part = pending.header.flip();
    if (pending.version < 0) {
      if (part.getInt() != BulkWire.MAGIC) {
        throw new IllegalArgumentException("not a bulletin data connection (upgrade the client)");
      }
      pending.version = part.getInt();
      int bytes = tickets.ticketBytes(pending.version);
      pending.lengthRead = bytes != LENGTH_PREFIXED;
      pending.header = ByteBuffer.allocate(pending.lengthRead ? bytes : 4);
      return null;
    }
    if (!pending.lengthRead) {
      int bytes = part.getInt();
      if (bytes <= 0 || bytes > MAX_TICKET_BYTES) {
        throw new IllegalArgumentException("a ticket of " + bytes + " bytes; at most "
            + MAX_TICKET_BYTES + " are taken");
      }
      pending.lengthRead = true;
      pending.header = ByteBuffer.allocate(bytes);
      return null;
    }
    byte[] ticket = new byte[part.remaining()];
    part.get(ticket);
    return ticket;
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
