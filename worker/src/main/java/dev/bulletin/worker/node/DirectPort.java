package dev.bulletin.worker.node;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.bridge.dataport.BulkServe;
import dev.bulletin.bridge.dataport.BulkWire;
import dev.bulletin.bridge.dataport.DataPortServer;
import dev.bulletin.bridge.dataport.DirectTicket;
import dev.bulletin.bridge.dataport.HeaderGate;
import dev.bulletin.bridge.dataport.TlsEngines;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A worker's own data port: serves the objects its store keeps straight to another worker (or a
 * client) holding a ticket the head signed for it, so those bytes never cross the head's link.
 * GET only. The same {@link DataPortServer} as the runtime's port (a non-blocking gate for
 * tickets: no thread per waiting connection, caps per address, a deadline for the header; data
 * threads; stalled transfers cut); the ticket is checked ({@link DirectTicket.Verifier}:
 * signature, object, reader, expiry, single use) before any byte of the object leaves.
 * Plaintext in a plaintext cluster (sendfile); when the cluster speaks TLS, TLS with the
 * worker's own self-signed certificate ({@link dev.bulletin.worker.tls.PortIdentity}), which
 * readers pin by the fingerprint the head hands out with each ticket.
 */
final class DirectPort implements AutoCloseable {
  static final int DATA_THREADS = 4;
  static final long HEADER_NANOS = TimeUnit.SECONDS.toNanos(5);
  static final long STALL_NANOS = TimeUnit.SECONDS.toNanos(30);

  private final DirectTicket.Verifier verifier =
      new DirectTicket.Verifier(System::currentTimeMillis);
  private final AtomicLong servedBytes = new AtomicLong();
  private DataPortServer<ObjectKey> server;

  private DirectPort() {}

  /**
   * Listens on host, any free port, and starts serving.
   *
   * @param tls the engines every connection must speak with (the port's identity); null: plaintext
   */
  static DirectPort start(String host, ObjectStore store, TlsEngines tls) throws IOException {
    ServerSocketChannel bound = ServerSocketChannel.open();
    try {
      bound.bind(new InetSocketAddress(host, 0), 64);
    } catch (IOException e) {
      bound.close();
      throw new IOException("cannot listen for direct data connections on " + host + ": "
          + e.getMessage(), e);
    }
    DirectPort port = new DirectPort();
    port.server = DataPortServer.start(bound, tls, new HeaderGate.Redeemer<>() {
      @Override
      public int ticketBytes(int version) {
        if (version != BulkWire.VERSION_DIRECT) {
          throw new IllegalArgumentException("this is a worker's data port: it serves direct"
              + " tickets (version " + BulkWire.VERSION_DIRECT + ") only");
        }
        return HeaderGate.LENGTH_PREFIXED;
      }

      @Override
      public ObjectKey redeem(int version, byte[] ticket) {
        return port.verifier.check(ticket);
      }
    }, (stream, key, io, progressed) -> {
      // Over TLS the records' AEAD already authenticates every byte: no CRC pass (BulkWire).
      long sent = BulkServe.get(store, key, stream, io, progressed, tls == null);
      if (sent > 0) {
        port.servedBytes.addAndGet(sent);
      }
    }, new DataPortServer.Options("bulletin-direct", DATA_THREADS, HEADER_NANOS, STALL_NANOS),
        () -> { });
    return port;
  }

  int port() {
    return server.port();
  }

  /** The head's key for this worker's tickets (given at every attach). */
  void ticketKey(byte[] key) {
    verifier.key(key);
  }

  /** Bytes of objects this port has sent, since it started. */
  long servedBytes() {
    return servedBytes.get();
  }

  @Override
  public void close() {
    server.close();
  }
}
