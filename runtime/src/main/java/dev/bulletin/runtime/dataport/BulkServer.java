package dev.bulletin.runtime.dataport;

import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.bridge.dataport.DataPortServer;
import dev.bulletin.bridge.dataport.TlsEngines;
import dev.bulletin.runtime.PortInUseException;
import dev.bulletin.runtime.objects.ObjectApi;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;

/**
 * The runtime's bulk data port: raw TCP beside the gRPC API, for the bytes of cross-host object
 * transfers (gRPC's one HTTP/2 stream per transfer and its protobuf chunk copies held them to
 * a fifth of the link). Served by a {@link DataPortServer} (a non-blocking gate for tickets,
 * data threads for admitted connections); each connection is a {@link BulkConnection} on a
 * ticket from OpenTransfer. With TLS every connection speaks it (the gate runs the handshake);
 * without, the bytes go with sendfile and straight into the store's pages.
 */
public final class BulkServer implements AutoCloseable {
  /** Admitted connections served at once; more wait for a data thread. */
  static final int DATA_THREADS = 8;
  /** A connection that moves no byte for this long is cut (its upload is discarded). */
  static final long STALL_NANOS = TimeUnit.SECONDS.toNanos(30);
  /** A connection must present its ticket within this, or it is closed. */
  static final long HEADER_NANOS = TimeUnit.SECONDS.toNanos(5);

  private final DataPortServer<BulkTickets.Ticket> server;
  private final BulkTickets tickets;

  private BulkServer(DataPortServer<BulkTickets.Ticket> server, BulkTickets tickets) {
    this.server = server;
    this.tickets = tickets;
  }

  /**
   * Listens on host:port (0: any free port) and starts serving.
   *
   * @param tls the TLS engines every connection must speak with; null for plaintext
   * @param loop runs work on the control plane's event loop (a stored object's hand-over)
   */
  public static BulkServer start(String host, int port, TlsEngines tls, BulkTickets tickets,
      ObjectStore store, Executor loop, ObjectApi objects) throws IOException {
    ServerSocketChannel bound = ServerSocketChannel.open();
    try {
      bound.bind(new InetSocketAddress(host, port), 64);
    } catch (IOException e) {
      bound.close();
      if (PortInUseException.explain(e, host, port, "--data-port")
          instanceof PortInUseException inUse) {
        throw inUse;
      }
      throw new IOException("cannot listen for data connections on " + host + ":" + port
          + ": " + e.getMessage(), e);
    }
    return new BulkServer(DataPortServer.start(bound, tls, tickets,
        (stream, ticket, io, progressed) -> new BulkConnection(stream, ticket, store, io, loop,
            objects, progressed).serve(),
        new DataPortServer.Options("bulletin-data", DATA_THREADS, HEADER_NANOS, STALL_NANOS),
        tickets::sweep), tickets);
  }

  public int port() {
    return server.port();
  }

  @Override
  public void close() {
    server.close();
    tickets.closeAll();
  }
}
