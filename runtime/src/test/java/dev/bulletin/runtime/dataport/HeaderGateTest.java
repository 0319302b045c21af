package dev.bulletin.runtime.dataport;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.bridge.ObjectStores;
import dev.bulletin.bridge.StoreOptions;
import dev.bulletin.bridge.dataport.BulkWire;
import dev.bulletin.bridge.dataport.HeaderGate;
import dev.bulletin.runtime.objects.ObjectApi;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketException;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The data port's header gate on a real loopback socket: connections that show no ticket never
 * reach a data thread, the oldest of a flooding address is closed to let a newcomer in, an
 * overdue one is closed at its deadline, and a valid ticket is admitted in blocking mode.
 */
class HeaderGateTest {
  @TempDir Path folder;
  private final AtomicLong now = new AtomicLong();
  private final BlockingQueue<BulkTickets.Ticket> admitted = new ArrayBlockingQueue<>(8);
  private ObjectStore store;
  private BulkTickets tickets;
  private ServerSocketChannel server;
  private HeaderGate<BulkTickets.Ticket> gate;
  private final List<Socket> clients = new ArrayList<>();

  @BeforeEach
  void start() throws IOException {
    store = ObjectStores.open(new StoreOptions(folder.resolve("mem"), 1 << 20, null));
    tickets = new BulkTickets(Duration.ofSeconds(60), now::get);
    server = ServerSocketChannel.open().bind(new InetSocketAddress("127.0.0.1", 0));
    gate = new HeaderGate<>(server, null, tickets, TimeUnit.SECONDS.toNanos(5), now::get,
        (channel, stream, ticket) -> {
          assertTrue(channel.isBlocking(), "an admitted connection is handed over blocking");
          admitted.add(ticket);
        });
    Thread thread = new Thread(gate, "gate-under-test");
    thread.setDaemon(true);
    thread.start();
  }

  @AfterEach
  void stop() throws IOException {
    for (Socket client : clients) {
      client.close();
    }
    server.close();
    gate.wakeup();
    store.close();
  }

  private Socket connect() throws IOException {
    Socket socket = new Socket("127.0.0.1", server.socket().getLocalPort());
    socket.setSoTimeout(10_000);
    clients.add(socket);
    return socket;
  }

  private static boolean closedByPeer(Socket socket) throws IOException {
    try {
      InputStream in = socket.getInputStream();
      return in.read() == -1;
    } catch (SocketException reset) {
      return true;
    }
  }

  private void awaitPending(int count) throws InterruptedException {
    for (int i = 0; i < 200 && gate.pendingCount() != count; i++) {
      Thread.sleep(25);
    }
    assertEquals(count, gate.pendingCount());
  }

  @Test
  void aFloodingAddressLosesItsOldestConnectionsAndAValidTicketStillGetsIn() throws Exception {
    int flood = HeaderGate.PENDING_PER_ADDRESS + 10;
    List<Socket> idle = new ArrayList<>();
    for (int i = 0; i < flood; i++) {
      idle.add(connect());
    }
    awaitPending(HeaderGate.PENDING_PER_ADDRESS);
    for (Socket oldest : idle.subList(0, 10)) {
      assertTrue(closedByPeer(oldest), "the oldest pending connections of the address are closed");
    }

    ObjectKey key = ObjectKey.of("ada", "1".repeat(32));
    byte[] ticket = tickets.issue(BulkTickets.Direction.PUT, ObjectApi.Caller.user("ada", null),
        key, 16, store.beginUpload(key, 16));
    Socket real = connect();
    real.getOutputStream().write(ByteBuffer.allocate(8 + ticket.length).putInt(BulkWire.MAGIC)
        .putInt(BulkWire.VERSION).put(ticket).array());
    BulkTickets.Ticket redeemed = admitted.poll(10, TimeUnit.SECONDS);
    assertEquals(key, redeemed.key());
    redeemed.upload().close();
  }

  @Test
  void aConnectionWithoutItsHeaderIsClosedAtItsDeadline() throws Exception {
    Socket slow = connect();
    slow.getOutputStream().write(new byte[] {0x42, 0x4C}); // two bytes of the magic, then silence
    awaitPending(1);
    now.addAndGet(TimeUnit.SECONDS.toNanos(6));
    assertTrue(closedByPeer(slow));
    awaitPending(0);
    assertTrue(admitted.isEmpty());
  }

  @Test
  void aBadHeaderOrTicketIsRefusedWithAReason() throws Exception {
    Socket stranger = connect();
    stranger.getOutputStream().write(new byte[8 + 32]);
    InputStream in = stranger.getInputStream();
    assertEquals(BulkWire.REFUSED, in.read());
    byte[] length = in.readNBytes(4);
    String message = new String(in.readNBytes(ByteBuffer.wrap(length).getInt()));
    assertTrue(message.contains("not a bulletin data connection"), message);

    Socket unknown = connect();
    unknown.getOutputStream().write(ByteBuffer.allocate(40).putInt(BulkWire.MAGIC)
        .putInt(BulkWire.VERSION).array());
    assertEquals(BulkWire.REFUSED, unknown.getInputStream().read());
    assertTrue(admitted.isEmpty());
  }
}
