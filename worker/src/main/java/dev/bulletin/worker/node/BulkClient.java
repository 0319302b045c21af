package dev.bulletin.worker.node;

import dev.bulletin.bridge.dataport.BulkIo;
import dev.bulletin.bridge.dataport.BulkWire;
import dev.bulletin.bridge.dataport.DaemonThreads;
import dev.bulletin.bridge.dataport.TlsChannel;
import dev.bulletin.bridge.dataport.TlsEngines;
import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import java.io.EOFException;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ByteChannel;
import java.nio.channels.FileChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * The worker node's side of the runtime's bulk data port: moves objects between this host's
 * store and the runtime's with the wire format of {@link BulkWire} and the same I/O as
 * the runtime's side ({@link BulkIo}: received straight into reused memory, sent with
 * sendfile, CRC32C-checked; over TLS when the runtime speaks it). Blocking: call it from a thread that may block, never an event
 * loop. A transfer that moves nothing for {@link #STALL_MILLIS} is cut, as the runtime cuts one
 * from its side. Thread-safe.
 */
public final class BulkClient implements AutoCloseable {
  static final long STALL_MILLIS = TimeUnit.SECONDS.toMillis(60);
  private static final int CONNECT_TIMEOUT_MILLIS = 10_000;
  /** A keeper that does not answer within this is taken as unreachable (the head path then). */
  static final int DIRECT_CONNECT_MILLIS = 3_000;

  /** The runtime answered a status other than "go on" / "stored"; see BulkWire. */
  public static final class RefusedException extends IOException {
    private final byte status;

    RefusedException(byte status, String message) {
      super(message);
      this.status = status;
    }

    /** The bytes failed their check: nothing was stored, a new ticket may send them again. */
    public boolean corrupt() {
      return status == BulkWire.CORRUPT;
    }
  }

  /** The data port cannot be reached (as opposed to a transfer that failed once connected). */
  public static final class UnreachableException extends IOException {
    UnreachableException(InetSocketAddress address, IOException cause) {
      super("the data port " + address.getHostString() + ":" + address.getPort()
          + " cannot be reached: " + cause.getMessage(), cause);
    }
  }

  private final ObjectStore store;
  /** Null: plaintext data connections. */
  private final TlsEngines tls;
  private final ExecutorService helpers = Executors.newCachedThreadPool(
      DaemonThreads.named("bulletin-node-data"));
  private final BulkIo io = new BulkIo(helpers);
  private final ScheduledExecutorService watchdog =
      Executors.newSingleThreadScheduledExecutor(DaemonThreads.named("bulletin-node-data-watch"));
  private final Set<Transfer> live = ConcurrentHashMap.newKeySet();

  /**
   * @param tls the engines of TLS data connections (trusting the runtime's CA); null for
   *     plaintext
   */
  public BulkClient(ObjectStore store, TlsEngines tls) {
    this.store = store;
    this.tls = tls;
    watchdog.scheduleWithFixedDelay(this::cutStalled, 1, 1, TimeUnit.SECONDS);
  }

  /**
   * Receives the object a GET ticket names into the local store, with one reference on it. It
   * becomes visible only once whole and checked: a cut or a bad CRC leaves nothing.
   */
  public ObjectKey get(InetSocketAddress address, byte[] ticket, ObjectKey key)
      throws IOException {
    return receive(open(address, header(BulkWire.VERSION, ticket, false),
        CONNECT_TIMEOUT_MILLIS, tls), key, true);
  }

  /**
   * Receives an object straight from the worker that keeps it, on a request carrying the
   * ticket the head signed ({@link dev.bulletin.bridge.dataport.DirectTicket#request}); as
   * {@link #get} otherwise. A keeper that cannot be reached fails with
   * {@link UnreachableException} within {@link #DIRECT_CONNECT_MILLIS}.
   *
   * @param tls the keeper's port speaks TLS and must present the certificate these engines
   *     pin ({@link dev.bulletin.worker.tls.PinnedTrust}): the request, with its ticket, is
   *     sent only after that handshake; null: a plaintext port
   */
  public ObjectKey getDirect(InetSocketAddress address, byte[] request, ObjectKey key,
      TlsEngines tls) throws IOException {
    // A keeper's TLS port sends no CRC: its AEAD records are the check (BulkWire).
    return receive(open(address, header(BulkWire.VERSION_DIRECT, request, true),
        DIRECT_CONNECT_MILLIS, tls), key, tls == null);
  }

  private ObjectKey receive(Transfer opened, ObjectKey key, boolean checksum)
      throws IOException {
    try (Transfer transfer = opened) {
      long size = transfer.read(8).getLong();
      try (ObjectStore.Upload upload = store.beginUpload(key, size)) {
        int crc = io.receive(transfer.channel, upload, size, transfer::progressed, checksum);
        int trailer = transfer.read(4).getInt();
        if (checksum && trailer != crc) {
          throw new RefusedException(BulkWire.CORRUPT, "the download of " + key.id()
              + " failed its CRC32C check; nothing was stored");
        }
        return upload.commit();
      }
    }
  }

  private static ByteBuffer header(int version, byte[] ticket, boolean lengthPrefixed) {
    ByteBuffer header = ByteBuffer.allocate(8 + (lengthPrefixed ? 4 : 0) + ticket.length)
        .putInt(BulkWire.MAGIC).putInt(version);
    if (lengthPrefixed) {
      header.putInt(ticket.length);
    }
    return header.put(ticket).flip();
  }

  /** Sends a local object on a PUT ticket; returns once the runtime stored it. */
  public void put(InetSocketAddress address, byte[] ticket, ObjectKey key) throws IOException {
    try (ObjectStore.Lease lease = store.lease(List.of(key)); // kept in memory while sent
        FileChannel file = FileChannel.open(lease.path(key), StandardOpenOption.READ);
        Transfer transfer = open(address, header(BulkWire.VERSION, ticket, false),
            CONNECT_TIMEOUT_MILLIS, tls)) {
      long size = file.size();
      CompletableFuture<Integer> crc = io.crcAsync(file, size);
      io.send(file, size, transfer.channel, transfer::progressed);
      transfer.write(ByteBuffer.allocate(4).putInt(crc.join()).flip());
      transfer.expectStored();
    }
  }

  private Transfer open(InetSocketAddress address, ByteBuffer header, int connectMillis,
      TlsEngines tls) throws IOException {
    SocketChannel channel = SocketChannel.open();
    try {
      channel.socket().connect(address, connectMillis);
    } catch (IOException e) {
      channel.close();
      throw new UnreachableException(address, e);
    }
    Transfer transfer = new Transfer(channel, tls == null ? channel
        : TlsChannel.client(channel, tls, address.getHostString(), address.getPort()));
    try {
      channel.socket().setTcpNoDelay(true);
      transfer.write(header);
      byte status = transfer.read(1).get();
      if (status != BulkWire.OK) {
        throw transfer.refusal(status);
      }
      return transfer;
    } catch (IOException | RuntimeException e) {
      transfer.close();
      throw e;
    }
  }

  private void cutStalled() {
    long now = System.nanoTime();
    for (Transfer transfer : live) {
      if (now - transfer.lastProgressNanos > TimeUnit.MILLISECONDS.toNanos(STALL_MILLIS)) {
        transfer.close(); // its thread's blocked read or write then fails
      }
    }
  }

  @Override
  public void close() {
    watchdog.shutdownNow();
    live.forEach(Transfer::close);
    helpers.shutdownNow();
  }

  /** One data connection, watched for stalls while it is open. */
  private final class Transfer implements AutoCloseable {
    final SocketChannel socket;
    /** What the transfer reads and writes: the socket itself, or TLS over it. */
    final ByteChannel channel;
    volatile long lastProgressNanos = System.nanoTime();

    Transfer(SocketChannel socket, ByteChannel channel) {
      this.socket = socket;
      this.channel = channel;
      live.add(this);
    }

    void progressed() {
      lastProgressNanos = System.nanoTime();
    }

    ByteBuffer read(int bytes) throws IOException {
      ByteBuffer buffer = ByteBuffer.allocate(bytes);
      while (buffer.hasRemaining()) {
        if (channel.read(buffer) < 0) {
          throw new EOFException("the runtime closed the data connection");
        }
        progressed();
      }
      return buffer.flip();
    }

    void write(ByteBuffer buffer) throws IOException {
      while (buffer.hasRemaining()) {
        channel.write(buffer);
      }
    }

    /** Reads the runtime's verdict on a PUT: u8 status, u32 length, message. */
    void expectStored() throws IOException {
      byte status = read(1).get();
      RefusedException verdict = refusal(status);
      if (status != BulkWire.OK) {
        throw verdict;
      }
    }

    /** Reads the message that follows a status byte. */
    RefusedException refusal(byte status) throws IOException {
      int length = read(4).getInt();
      if (length < 0 || length > 1 << 16) {
        throw new IOException("the data port sent a malformed reply (message of " + length
            + " bytes)");
      }
      String message = StandardCharsets.UTF_8.decode(read(length)).toString();
      return new RefusedException(status, message);
    }

    @Override
    public void close() {
      live.remove(this);
      try {
        socket.close();
      } catch (IOException ignored) {
        // Closing anyway.
      }
    }
  }
}
