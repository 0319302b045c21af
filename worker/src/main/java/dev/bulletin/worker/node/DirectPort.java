package dev.bulletin.worker.node;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.bridge.dataport.BulkIo;
import dev.bulletin.bridge.dataport.BulkServe;
import dev.bulletin.bridge.dataport.BulkWire;
import dev.bulletin.bridge.dataport.DaemonThreads;
import dev.bulletin.bridge.dataport.DirectTicket;
import dev.bulletin.bridge.dataport.HeaderGate;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.channels.ByteChannel;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * A worker's own data port: serves the objects its store keeps straight to another worker (or a
 * client) holding a ticket the head signed for it, so those bytes never cross the head's link.
 * GET only. The connection first meets the same {@link HeaderGate} as the runtime's port (no
 * thread per waiting connection, caps per address, a deadline for the header); the ticket is
 * checked ({@link DirectTicket.Verifier}: signature, object, reader, expiry, single use) before
 * any byte of the object leaves. Plaintext only: a cluster that speaks TLS does not open it.
 */
final class DirectPort implements AutoCloseable {
  private static final Logger LOG = Logger.getLogger(DirectPort.class.getName());
  static final int DATA_THREADS = 4;
  static final long HEADER_NANOS = TimeUnit.SECONDS.toNanos(5);
  static final long STALL_NANOS = TimeUnit.SECONDS.toNanos(30);

  private final ServerSocketChannel server;
  private final ObjectStore store;
  private final DirectTicket.Verifier verifier =
      new DirectTicket.Verifier(System::currentTimeMillis);
  private final ExecutorService data = Executors.newFixedThreadPool(DATA_THREADS,
      DaemonThreads.named("bulletin-direct"));
  private final ExecutorService helpers = Executors.newCachedThreadPool(
      DaemonThreads.named("bulletin-direct-crc"));
  private final ScheduledExecutorService sweeper = Executors.newSingleThreadScheduledExecutor(
      DaemonThreads.named("bulletin-direct-sweep"));
  private final BulkIo io = new BulkIo(helpers);
  private final HeaderGate<ObjectKey> gate;
  /** Connections being served, with the time they last moved a byte. */
  private final Map<SocketChannel, AtomicLong> live = new ConcurrentHashMap<>();
  private final AtomicLong servedBytes = new AtomicLong();

  private DirectPort(ServerSocketChannel server, ObjectStore store) throws IOException {
    this.server = server;
    this.store = store;
    this.gate = new HeaderGate<>(server, null, new HeaderGate.Redeemer<>() {
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
        return verifier.check(ticket);
      }
    }, HEADER_NANOS, System::nanoTime, this::admit);
  }

  /** Listens on host, any free port, and starts serving. */
  static DirectPort start(String host, ObjectStore store) throws IOException {
    ServerSocketChannel server = ServerSocketChannel.open();
    try {
      server.bind(new InetSocketAddress(host, 0), 64);
    } catch (IOException e) {
      server.close();
      throw new IOException("cannot listen for direct data connections on " + host + ": "
          + e.getMessage(), e);
    }
    DirectPort port = new DirectPort(server, store);
    Thread acceptor = new Thread(port.gate, "bulletin-direct-accept");
    acceptor.setDaemon(true);
    acceptor.start();
    port.sweeper.scheduleWithFixedDelay(port::cutStalled, 1, 1, TimeUnit.SECONDS);
    return port;
  }

  int port() {
    return server.socket().getLocalPort();
  }

  /** The head's key for this worker's tickets (given at every attach). */
  void ticketKey(byte[] key) {
    verifier.key(key);
  }

  /** Bytes of objects this port has sent, since it started. */
  long servedBytes() {
    return servedBytes.get();
  }

  private void admit(SocketChannel socket, ByteChannel stream, ObjectKey key) {
    AtomicLong progress = new AtomicLong(System.nanoTime());
    live.put(socket, progress);
    try {
      data.execute(() -> serve(socket, stream, key, progress));
    } catch (java.util.concurrent.RejectedExecutionException stopping) {
      live.remove(socket);
      close(socket);
    }
  }

  private void serve(SocketChannel socket, ByteChannel stream, ObjectKey key,
      AtomicLong progress) {
    try (socket) {
      socket.socket().setTcpNoDelay(true);
      long sent = BulkServe.get(store, key, stream, io, () -> progress.set(System.nanoTime()));
      if (sent > 0) {
        servedBytes.addAndGet(sent);
      }
    } catch (IOException | RuntimeException e) {
      LOG.log(Level.FINE, "direct data connection ended: " + e, e);
    } finally {
      live.remove(socket);
    }
  }

  private void cutStalled() {
    long now = System.nanoTime();
    live.forEach((socket, progress) -> {
      if (now - progress.get() > STALL_NANOS) {
        close(socket);
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
    try {
      server.close();
    } catch (IOException ignored) {
      // Stopping anyway.
    }
    gate.wakeup();
    sweeper.shutdownNow();
    live.keySet().forEach(DirectPort::close);
    data.shutdownNow();
    helpers.shutdownNow();
  }
}
