package dev.bulletin.worker.node;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.bridge.ObjectStores;
import dev.bulletin.bridge.StoreOptions;
import dev.bulletin.bridge.dataport.DirectTicket;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.Random;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A worker's own data port on real loopback sockets, between two stores as two worker nodes
 * have them: keeper A serves an object on a ticket signed with its key; reader B receives it
 * whole and checked into its store. Every bad ticket is refused over the wire, before a byte
 * of the object is sent, with the keeper's reason; and a keeper that cannot be reached fails as
 * unreachable (which sends the reader to the head's path).
 */
class DirectPortTest {
  @TempDir Path folder;
  private ObjectStore keeperStore;
  private ObjectStore readerStore;
  private DirectPort keeper;
  private BulkClient reader;
  private final byte[] key = DirectTicket.newKey();
  private ObjectKey object;
  private byte[] payload;

  @BeforeEach
  void start() throws IOException {
    keeperStore = ObjectStores.open(new StoreOptions(folder.resolve("a"), 64 << 20, null));
    readerStore = ObjectStores.open(new StoreOptions(folder.resolve("b"), 64 << 20, null));
    keeper = DirectPort.start("127.0.0.1", keeperStore, null);
    keeper.ticketKey(key);
    reader = new BulkClient(readerStore, null);
    payload = new byte[5 << 20];
    new Random(7).nextBytes(payload);
    object = keeperStore.put(ObjectKey.of("alice", "00112233445566778899aabbccddeeff"),
        ByteBuffer.wrap(payload));
  }

  @AfterEach
  void stop() {
    reader.close();
    keeper.close();
    keeperStore.close();
    readerStore.close();
  }

  private InetSocketAddress address() {
    return new InetSocketAddress("127.0.0.1", keeper.port());
  }

  private byte[] request(String readerId, ObjectKey wanted, byte[] ticket) {
    return DirectTicket.request(readerId, wanted, ticket);
  }

  private byte[] ticket(ObjectKey what, String readerId, long ttlMillis) {
    return DirectTicket.sign(key, what, readerId, System.currentTimeMillis() + ttlMillis);
  }

  private String refusal(byte[] request, ObjectKey wanted) {
    BulkClient.RefusedException refused = assertThrows(BulkClient.RefusedException.class,
        () -> reader.getDirect(address(), request, wanted, null));
    assertFalse(readerStore.contains(wanted), "nothing is stored from a refused transfer");
    return refused.getMessage();
  }

  @Test
  void theKeeperSendsTheObjectToTheTicketsReader() throws IOException {
    ObjectKey got = reader.getDirect(address(),
        request("worker-b", object, ticket(object, "worker-b", 60_000)), object, null);
    assertEquals(object, got);
    ByteBuffer stored = readerStore.read(got);
    byte[] bytes = new byte[stored.remaining()];
    stored.get(bytes);
    assertArrayEquals(payload, bytes);
    assertEquals(payload.length, keeper.servedBytes());
  }

  @Test
  void everyBadTicketIsRefusedBeforeAnyByteIsSent() {
    ObjectKey other = ObjectKey.of("alice", "ffeeddccbbaa99887766554433221100");
    byte[] good = ticket(object, "worker-b", 60_000);
    assertTrue(refusal(request("worker-b", other, good), other).contains("is for object"));
    assertTrue(refusal(request("worker-c", object, good), object)
        .contains("issued to worker-b, not worker-c"));
    assertTrue(refusal(request("worker-b", object, ticket(object, "worker-b", -1)), object)
        .contains("expired"));
    byte[] foreign = DirectTicket.sign(DirectTicket.newKey(), object, "worker-b",
        System.currentTimeMillis() + 60_000);
    assertTrue(refusal(request("worker-b", object, foreign), object)
        .contains("signature is not this worker's"));
    // Bob's namespace is another object: a ticket for alice's cannot be turned into one.
    ObjectKey bobs = ObjectKey.of("bob", object.id().hex());
    assertTrue(refusal(request("worker-b", bobs, good), bobs).contains("is for object"));
    assertEquals(0, keeper.servedBytes());
  }

  @Test
  void aTicketIsUsedOnce() throws IOException {
    byte[] once = request("worker-b", object, ticket(object, "worker-b", 60_000));
    reader.getDirect(address(), once, object, null);
    readerStore.release(object);
    readerStore.dropUnreferencedObjects();
    assertTrue(refusal(once, object).contains("already used"));
  }

  @Test
  void theRuntimesTicketsAreNotTakenHere() throws IOException {
    // A version-1 header (the head's random tickets) on a worker's port: refused, saying why.
    BulkClient.RefusedException refused = assertThrows(BulkClient.RefusedException.class,
        () -> reader.get(address(), new byte[32], object));
    assertTrue(refused.getMessage().contains("serves direct tickets"), refused.getMessage());
  }

  @Test
  void aKeeperThatCannotBeReachedIsUnreachable() throws IOException {
    int closed;
    try (ServerSocket probe = new ServerSocket(0)) {
      closed = probe.getLocalPort();
    }
    assertThrows(BulkClient.UnreachableException.class, () -> reader.getDirect(
        new InetSocketAddress("127.0.0.1", closed),
        request("worker-b", object, ticket(object, "worker-b", 60_000)), object, null));
  }
}
