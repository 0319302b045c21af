package dev.bulletin.bridge.dataport;

import java.io.IOException;
import java.nio.channels.ByteChannel;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * A data port: raw TCP for the bytes of object transfers, the runtime's and each worker's own.
 * A {@link HeaderGate} thread accepts connections and reads their tickets without blocking; a
 * connection with a redeemed ticket goes to a small pool of data threads doing blocking I/O
 * (never an event loop); a sweeper runs the owner's periodic work (expiring tickets) and cuts
 * transfers that moved nothing for too long. What a connection does is the {@link Handler}'s.
 *
 * @param <T> what a redeemed ticket allows
 */
public final class DataPortServer<T> implements AutoCloseable {
  private static final Logger LOG = Logger.getLogger(DataPortServer.class.getName());

  /** Serves one admitted connection on a data thread; the server closes the socket after. */
  public interface Handler<T> {
    /**
     * @param stream what to read and write: the socket itself, or TLS over it
     * @param progressed call whenever bytes moved (a connection silent too long is cut)
     */
    void serve(ByteChannel stream, T ticket, BulkIo io, Runnable progressed) throws IOException;
  }

  /**
   * How a port serves.
   *
   * @param name names its threads ("bulletin-data": bulletin-data-accept, ...)
   * @param dataThreads admitted connections served at once; more wait for a thread
   * @param headerNanos a connection must show its ticket within this, or it is closed
   * @param stallNanos an admitted connection that moves no byte for this long is cut
   */
  public record Options(String name, int dataThreads, long headerNanos, long stallNanos) {}

  private final ServerSocketChannel server;
  private final Handler<T> handler;
  private final Options options;
  private final ExecutorService data;
  private final ExecutorService helpers;
  private final ScheduledExecutorService sweeper;
  private final BulkIo io;
  private final HeaderGate<T> gate;
  /** Connections being served, with the time they last moved a byte. */
  private final Map<SocketChannel, AtomicLong> live = new ConcurrentHashMap<>();

  private DataPortServer(ServerSocketChannel server, TlsEngines tls,
      HeaderGate.Redeemer<T> tickets, Handler<T> handler, Options options) throws IOException {
    this.server = server;
    this.handler = handler;
    this.options = options;
    this.data = Executors.newFixedThreadPool(options.dataThreads(),
        DaemonThreads.named(options.name()));
    this.helpers = Executors.newCachedThreadPool(DaemonThreads.named(options.name() + "-crc"));
    this.sweeper = Executors.newSingleThreadScheduledExecutor(
        DaemonThreads.named(options.name() + "-sweep"));
    this.io = new BulkIo(helpers);
    this.gate = new HeaderGate<>(server, tls, tickets, options.headerNanos(), System::nanoTime,
        (socket, stream, ticket) -> admit(socket, stream, ticket));
  }

  /**
   * Starts serving on a bound server channel.
   *
   * @param tls the TLS engines every connection must speak with; null for plaintext
   * @param sweep runs every second beside the stall check (e.g. dropping expired tickets)
   */
  public static <T> DataPortServer<T> start(ServerSocketChannel bound, TlsEngines tls,
      HeaderGate.Redeemer<T> tickets, Handler<T> handler, Options options, Runnable sweep)
      throws IOException {
    DataPortServer<T> port = new DataPortServer<>(bound, tls, tickets, handler, options);
    Thread acceptor = new Thread(port.gate, options.name() + "-accept");
    acceptor.setDaemon(true);
    acceptor.start();
    port.sweeper.scheduleWithFixedDelay(() -> {
      sweep.run();
      port.cutStalled();
    }, 1, 1, TimeUnit.SECONDS);
    return port;
  }

  public int port() {
    return server.socket().getLocalPort();
  }

  /** Connections being served now (for tests). */
  public int liveCount() {
    return live.size();
  }

  private void admit(SocketChannel socket, ByteChannel stream, T ticket) {
    AtomicLong progress = new AtomicLong(System.nanoTime());
    live.put(socket, progress);
    try {
      data.execute(() -> serve(socket, stream, ticket, progress));
    } catch (RejectedExecutionException stopping) {
      live.remove(socket);
      close(socket);
    }
  }

  private void serve(SocketChannel socket, ByteChannel stream, T ticket, AtomicLong progress) {
    try (socket) {
      socket.socket().setTcpNoDelay(true);
      handler.serve(stream, ticket, io, () -> progress.set(System.nanoTime()));
    } catch (IOException | RuntimeException e) {
      LOG.log(Level.FINE, "data connection ended: " + e, e);
    } finally {
      live.remove(socket);
    }
  }

  private void cutStalled() {
    long now = System.nanoTime();
    live.forEach((socket, progress) -> {
      if (now - progress.get() > options.stallNanos()) {
        close(socket); // its data thread's blocked read or write then fails, and cleans up
      }
    });
  }

  private static void close(SocketChannel socket) {
    try {
      socket.close();
    } catch (IOException ignored) {
      // Closing anyway.
    }
  }

  @Override
  public void close() {
    close(server);
    gate.wakeup();
    sweeper.shutdownNow();
    live.keySet().forEach(DataPortServer::close);
    data.shutdownNow();
    helpers.shutdownNow();
  }

  private static void close(ServerSocketChannel channel) {
    try {
      channel.close();
    } catch (IOException ignored) {
      // Stopping anyway.
    }
  }
}
