package dev.bulletin.runtime.dataport;

import dev.bulletin.bridge.dataport.BulkIo;
import dev.bulletin.runtime.PortInUseException;
import dev.bulletin.bridge.dataport.DaemonThreads;
import dev.bulletin.bridge.dataport.HeaderGate;
import dev.bulletin.runtime.objects.ObjectApi;
import dev.bulletin.bridge.ObjectStore;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.SSLContext;

/**
 * The bulk data port: raw TCP beside the gRPC API, for the bytes of cross-host object
 * transfers (gRPC's one HTTP/2 stream per transfer and its protobuf chunk copies held them to
 * a fifth of the link). A {@link HeaderGate} thread accepts connections and reads their
 * tickets without blocking; a connection with a redeemed ticket goes to a small pool of data
 * threads doing blocking I/O; a sweeper drops expired tickets and cuts stalled transfers.
 * With TLS every connection speaks it (the gate runs the handshake); without, the bytes go
 * with sendfile and straight into the store's pages.
 */
public final class BulkServer implements AutoCloseable {
  /** Admitted connections served at once; more wait for a data thread. */
  static final int DATA_THREADS = 8;
  /** A connection that moves no byte for this long is cut (its upload is discarded). */
  static final long STALL_NANOS = TimeUnit.SECONDS.toNanos(30);
  /** A connection must present its ticket within this, or it is closed. */
  static final long HEADER_NANOS = TimeUnit.SECONDS.toNanos(5);

  private final ServerSocketChannel server;
  private final ExecutorService data;
  private final ExecutorService helpers;
  private final ScheduledExecutorService sweeper;
  private final Set<BulkConnection> live = ConcurrentHashMap.newKeySet();
  private final BulkTickets tickets;
  private final HeaderGate<BulkTickets.Ticket> gate;
  private final Thread acceptor;

  private BulkServer(ServerSocketChannel server, SSLContext tls, BulkTickets tickets,
      ObjectStore store, Executor loop, ObjectApi objects) throws IOException {
    this.server = server;
    this.tickets = tickets;
    this.data = Executors.newFixedThreadPool(DATA_THREADS, DaemonThreads.named("bulletin-data"));
    this.helpers = Executors.newCachedThreadPool(DaemonThreads.named("bulletin-data-crc"));
    this.sweeper = Executors.newSingleThreadScheduledExecutor(DaemonThreads.named("bulletin-data-sweep"));
    BulkIo io = new BulkIo(helpers);
    this.gate = new HeaderGate<>(server, tls, tickets, HEADER_NANOS, System::nanoTime,
        (socket, stream, ticket) -> admit(new BulkConnection(socket, stream, ticket, store, io,
            loop, objects, live::remove)));
    this.acceptor = new Thread(gate, "bulletin-data-accept");
    acceptor.setDaemon(true);
  }

  /**
   * Listens on host:port (0: any free port) and starts serving.
   *
   * @param tls the TLS context every connection must speak; null for plaintext
   * @param loop runs work on the control plane's event loop (a stored object's hand-over)
   */
  public static BulkServer start(String host, int port, SSLContext tls, BulkTickets tickets,
      ObjectStore store, Executor loop, ObjectApi objects) throws IOException {
    ServerSocketChannel server = ServerSocketChannel.open();
    try {
      server.bind(new InetSocketAddress(host, port), 64);
    } catch (IOException e) {
      server.close();
      if (PortInUseException.explain(e, host, port, "--data-port")
          instanceof PortInUseException inUse) {
        throw inUse;
      }
      throw new IOException("cannot listen for data connections on " + host + ":" + port
          + ": " + e.getMessage(), e);
    }
    BulkServer bulk = new BulkServer(server, tls, tickets, store, loop, objects);
    bulk.acceptor.start();
    bulk.sweeper.scheduleWithFixedDelay(bulk::sweep, 1, 1, TimeUnit.SECONDS);
    return bulk;
  }

  public int port() {
    return server.socket().getLocalPort();
  }

  private void admit(BulkConnection connection) {
    live.add(connection);
    try {
      data.execute(connection);
    } catch (java.util.concurrent.RejectedExecutionException stopping) {
      connection.abort();
      live.remove(connection);
    }
  }

  private void sweep() {
    tickets.sweep();
    long now = System.nanoTime();
    for (BulkConnection connection : live) {
      if (connection.stalled(now, STALL_NANOS)) {
        connection.abort();
      }
    }
  }

  @Override
  public void close() {
    try {
      server.close();
    } catch (IOException ignored) {
      // Stopping anyway.
    }
    gate.wakeup();
    sweeper.shutdownNow();
    live.forEach(BulkConnection::abort);
    data.shutdownNow();
    helpers.shutdownNow();
    tickets.closeAll();
  }

}
