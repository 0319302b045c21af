package dev.bulletin.runtime.dataport;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.bridge.ObjectStores;
import dev.bulletin.bridge.StoreOptions;
import dev.bulletin.bridge.dataport.BulkIo;
import dev.bulletin.bridge.dataport.BulkWire;
import dev.bulletin.bridge.dataport.HeaderGate;
import dev.bulletin.bridge.dataport.TlsChannel;
import dev.bulletin.bridge.dataport.TlsEngines;
import dev.bulletin.runtime.objects.ObjectApi;
import dev.bulletin.worker.tls.TlsOptions;
import dev.bulletin.worker.tls.TlsSetup;
import io.vertx.core.Vertx;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketException;
import java.nio.ByteBuffer;
import java.nio.channels.ByteChannel;
import java.nio.channels.FileChannel;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.zip.CRC32C;
import javax.net.ssl.SSLException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The data port's TLS on a real loopback socket, with the certificates `bulletin up` makes (its
 * own generator, {@code bulletin._tls}, run with BULLETIN_TEST_PYTHON) loaded by
 * {@link TlsSetup}: the header gate runs the handshake without blocking and admits a TLS
 * connection with a valid ticket, whose stream then moves an object each way through
 * {@link BulkIo} with matching CRCs, also past a flood of idle connections; a plaintext
 * connection, a client that trusts another CA and a client that dialled a name the certificate
 * does not carry are never admitted.
 */
class TlsGateTest {
  /** Over the 4 MiB receive buffers and the 64 MiB send windows, not a multiple of either. */
  private static final int OBJECT_BYTES = (70 << 20) + 12345;

  record Admitted(SocketChannel socket, ByteChannel stream, BulkTickets.Ticket ticket) {}

  /** Made once for the class (the generator takes about a second): the cluster's and another. */
  @TempDir static Path certificates;
  private static Path cluster;
  private static Path other;

  @TempDir Path folder;
  private final AtomicLong now = new AtomicLong();
  private final BlockingQueue<Admitted> admitted = new ArrayBlockingQueue<>(8);
  private final ExecutorService threads = Executors.newCachedThreadPool();
  private final Vertx vertx = Vertx.vertx();
  private ObjectStore serverStore;
  private ObjectStore clientStore;
  private BulkTickets tickets;
  private ServerSocketChannel server;
  private HeaderGate<BulkTickets.Ticket> gate;
  private BulkIo io;
  private TlsEngines trustsCluster;
  private TlsEngines trustsOtherCa;

  @BeforeAll
  static void makeCertificates() throws Exception {
    cluster = makeCertificates("cluster");
    other = makeCertificates("other");
  }

  @BeforeEach
  void start() throws Exception {
    TlsEngines serverContext = TlsSetup.serverEngines(vertx, TlsOptions.server(
        cluster.resolve("server.pem"), cluster.resolve("server-key.pem"), null));
    trustsCluster = TlsSetup.clientEngines(vertx, TlsOptions.client(cluster.resolve("ca.pem")));
    trustsOtherCa = TlsSetup.clientEngines(vertx, TlsOptions.client(other.resolve("ca.pem")));
    serverStore = ObjectStores.open(new StoreOptions(folder.resolve("server"), 1L << 30, null));
    clientStore = ObjectStores.open(new StoreOptions(folder.resolve("client"), 1L << 30, null));
    io = new BulkIo(threads);
    tickets = new BulkTickets(Duration.ofSeconds(60), now::get);
    server = ServerSocketChannel.open().bind(new InetSocketAddress("127.0.0.1", 0));
    gate = new HeaderGate<>(server, serverContext, tickets, TimeUnit.SECONDS.toNanos(5), now::get,
        (socket, stream, ticket) -> {
          assertTrue(socket.isBlocking(), "an admitted connection is handed over blocking");
          admitted.add(new Admitted(socket, stream, ticket));
        });
    Thread thread = new Thread(gate, "tls-gate-under-test");
    thread.setDaemon(true);
    thread.start();
  }

  @AfterEach
  void stop() throws Exception {
    server.close();
    gate.wakeup();
    threads.shutdownNow();
    serverStore.close();
    clientStore.close();
    vertx.close().toCompletionStage().toCompletableFuture().get(10, TimeUnit.SECONDS);
  }

  /** The CA and server certificate `bulletin up` makes, in a fresh state folder. */
  private static Path makeCertificates(String name) throws Exception {
    String python = System.getenv("BULLETIN_TEST_PYTHON");
    assertNotNull(python, "set BULLETIN_TEST_PYTHON to a Python with the bulletin package"
        + " (make test does)");
    Path home = Files.createDirectories(certificates.resolve(name));
    Process process = new ProcessBuilder(python, "-c",
        "import sys, pathlib; from bulletin import _tls;"
            + " _tls.ensure_server_files(pathlib.Path(sys.argv[1]), '127.0.0.1')",
        home.toString()).redirectErrorStream(true).start();
    String output = new String(process.getInputStream().readAllBytes());
    assertTrue(process.waitFor(60, TimeUnit.SECONDS) && process.exitValue() == 0, output);
    return home;
  }

  private byte[] ticketFor(ObjectKey key, BulkTickets.Direction direction, long size) {
    return tickets.issue(direction, ObjectApi.Caller.user("ada", null), key, size,
        direction == BulkTickets.Direction.PUT ? serverStore.beginUpload(key, size) : null);
  }

  private TlsChannel dial(TlsEngines context, String host) throws IOException {
    SocketChannel socket = SocketChannel.open(new InetSocketAddress("127.0.0.1",
        server.socket().getLocalPort()));
    return TlsChannel.client(socket, context, host, server.socket().getLocalPort());
  }

  private static void header(ByteChannel channel, byte[] ticket) throws IOException {
    ByteBuffer header = ByteBuffer.allocate(8 + ticket.length).putInt(BulkWire.MAGIC)
        .putInt(BulkWire.VERSION).put(ticket).flip();
    while (header.hasRemaining()) {
      channel.write(header);
    }
  }

  private static ByteBuffer readFully(ByteChannel channel, int bytes) throws IOException {
    ByteBuffer buffer = ByteBuffer.allocate(bytes);
    while (buffer.hasRemaining()) {
      if (channel.read(buffer) < 0) {
        throw new IOException("closed early");
      }
    }
    return buffer.flip();
  }

  private static int crcOf(byte[] bytes) {
    CRC32C crc = new CRC32C();
    crc.update(bytes);
    return (int) crc.getValue();
  }

  private static boolean closedByPeer(Socket socket) throws IOException {
    try {
      InputStream in = socket.getInputStream();
      return in.read() == -1;
    } catch (SocketException reset) {
      return true;
    }
  }

  @Test
  void aTlsConnectionWithATicketIsAdmittedAndMovesAnObjectEachWay() throws Exception {
    byte[] bytes = new byte[OBJECT_BYTES];
    new Random(7).nextBytes(bytes);
    Path file = folder.resolve("object");
    Files.write(file, bytes);
    ObjectKey key = ObjectKey.of("ada", "a".repeat(32));

    // Up: the client's file goes out from mapped windows, encrypted; the server receives it
    // into the store through the reused direct buffers.
    TlsChannel client = dial(trustsCluster, "127.0.0.1");
    header(client, ticketFor(key, BulkTickets.Direction.PUT, bytes.length));
    Admitted up = admitted.poll(10, TimeUnit.SECONDS);
    assertNotNull(up, "the TLS connection with a valid ticket is admitted");
    assertEquals(key, up.ticket().key());
    up.stream().write(ByteBuffer.wrap(new byte[] {BulkWire.OK}));
    assertEquals(BulkWire.OK, readFully(client, 1).get());
    CompletableFuture<Void> sent = CompletableFuture.runAsync(() -> {
      try (FileChannel in = FileChannel.open(file, StandardOpenOption.READ)) {
        io.send(in, bytes.length, client, () -> { });
      } catch (IOException e) {
        throw new java.io.UncheckedIOException(e);
      }
    }, threads);
    ObjectStore.Upload upload = up.ticket().upload();
    assertEquals(crcOf(bytes), io.receive(up.stream(), upload, bytes.length, () -> { }));
    sent.get(60, TimeUnit.SECONDS);
    upload.commit();
    try (ObjectStore.Lease lease = serverStore.lease(List.of(key))) {
      assertArrayEquals(bytes, Files.readAllBytes(lease.path(key)));
    }
    client.close();

    // Down: the stored object goes out through the server's TLS stream into the client's store.
    TlsChannel downClient = dial(trustsCluster, "localhost");
    header(downClient, ticketFor(key, BulkTickets.Direction.GET, bytes.length));
    Admitted down = admitted.poll(10, TimeUnit.SECONDS);
    assertNotNull(down);
    CompletableFuture<Void> served = CompletableFuture.runAsync(() -> {
      try (ObjectStore.Lease lease = serverStore.lease(List.of(key));
          FileChannel in = FileChannel.open(lease.path(key), StandardOpenOption.READ)) {
        io.send(in, bytes.length, down.stream(), () -> { });
      } catch (IOException e) {
        throw new java.io.UncheckedIOException(e);
      }
    }, threads);
    try (ObjectStore.Upload received = clientStore.beginUpload(key, bytes.length)) {
      assertEquals(crcOf(bytes), io.receive(downClient, received, bytes.length, () -> { }));
      received.commit();
    }
    served.get(60, TimeUnit.SECONDS);
    downClient.close();
    down.socket().close();
  }

  @Test
  void aPlaintextConnectionIsDroppedWithoutAdmission() throws Exception {
    ObjectKey key = ObjectKey.of("ada", "b".repeat(32));
    try (Socket plain = new Socket("127.0.0.1", server.socket().getLocalPort())) {
      plain.setSoTimeout(10_000);
      byte[] ticket = ticketFor(key, BulkTickets.Direction.PUT, 16);
      plain.getOutputStream().write(ByteBuffer.allocate(8 + ticket.length)
          .putInt(BulkWire.MAGIC).putInt(BulkWire.VERSION).put(ticket).array());
      assertTrue(closedByPeer(plain), "the gate closes a connection that does not speak TLS");
    }
    assertTrue(admitted.isEmpty());
  }

  @Test
  void idleConnectionsThatNeverStartTheHandshakeDoNotKeepARealClientOut() throws Exception {
    List<Socket> idle = new java.util.ArrayList<>();
    try {
      for (int i = 0; i < HeaderGate.PENDING_PER_ADDRESS + 10; i++) {
        idle.add(new Socket("127.0.0.1", server.socket().getLocalPort()));
      }
      ObjectKey key = ObjectKey.of("ada", "d".repeat(32));
      try (TlsChannel real = dial(trustsCluster, "127.0.0.1")) {
        header(real, ticketFor(key, BulkTickets.Direction.PUT, 16));
        Admitted admittedNow = admitted.poll(10, TimeUnit.SECONDS);
        assertNotNull(admittedNow, "the real client got in past the flood");
        admittedNow.ticket().upload().close();
        admittedNow.socket().close();
      }
      assertTrue(gate.pendingCount() <= HeaderGate.PENDING_PER_ADDRESS);
    } finally {
      for (Socket socket : idle) {
        socket.close();
      }
    }
  }

  @Test
  void aTlsClientWithAnUnknownTicketIsToldWhyInsideTls() throws Exception {
    try (TlsChannel client = dial(trustsCluster, "127.0.0.1")) {
      header(client, new byte[BulkTickets.TICKET_BYTES]);
      assertEquals(BulkWire.REFUSED, readFully(client, 1).get());
      String message = new String(readFully(client, readFully(client, 4).getInt()).array());
      assertTrue(message.contains("ticket"), message);
    }
    assertTrue(admitted.isEmpty());
  }

  @Test
  void aClientThatTrustsAnotherCaOrDialledAnotherNameRefusesTheServer() throws Exception {
    ObjectKey key = ObjectKey.of("ada", "c".repeat(32));
    byte[] ticket = ticketFor(key, BulkTickets.Direction.PUT, 16);
    try (TlsChannel wrongCa = dial(trustsOtherCa, "127.0.0.1")) {
      SSLException refused = assertThrows(SSLException.class, () -> header(wrongCa, ticket));
      assertTrue(refused.getMessage().contains("PKIX"), refused.getMessage());
    }
    try (TlsChannel wrongName = dial(trustsCluster, "bulletin-elsewhere.invalid")) {
      SSLException refused = assertThrows(SSLException.class, () -> header(wrongName, ticket));
      assertTrue(refused.getMessage().contains("bulletin-elsewhere.invalid"),
          refused.getMessage());
    }
    // Neither client sent its ticket: it is still unused, and nothing was admitted.
    try (TlsChannel good = dial(trustsCluster, "127.0.0.1")) {
      header(good, ticket);
      Admitted admittedNow = admitted.poll(10, TimeUnit.SECONDS);
      assertNotNull(admittedNow);
      assertEquals(key, admittedNow.ticket().key());
      assertTrue(admitted.isEmpty());
      admittedNow.ticket().upload().close();
      admittedNow.socket().close();
    }
  }
}
