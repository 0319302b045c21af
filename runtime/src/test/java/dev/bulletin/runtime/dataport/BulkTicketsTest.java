package dev.bulletin.runtime.dataport;

import dev.bulletin.runtime.objects.ObjectApi;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.bridge.ObjectStores;
import dev.bulletin.bridge.StoreFullException;
import dev.bulletin.bridge.StoreOptions;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Tickets of the bulk data port on a real store with a controlled clock: single use, refused
 * with a reason, and an upload ticket that expires gives its reserved room back exactly once.
 */
class BulkTicketsTest {
  private static final long CAPACITY = 8 << 20;

  @TempDir Path folder;
  private final AtomicLong now = new AtomicLong();
  private ObjectStore store;
  private BulkTickets tickets;
  private final ObjectApi.Caller ada = ObjectApi.Caller.user("ada", null);

  @BeforeEach
  void open() {
    store = ObjectStores.open(new StoreOptions(folder.resolve("mem"), CAPACITY, null));
    tickets = new BulkTickets(Duration.ofSeconds(60), now::get);
  }

  @AfterEach
  void close() {
    store.close();
  }

  private byte[] putTicket(int n) {
    ObjectKey key = ObjectKey.of("ada", String.format("%032x", n));
    return tickets.issue(BulkTickets.Direction.PUT, ada, key, CAPACITY,
        store.beginUpload(key, CAPACITY));
  }

  @Test
  void aTicketIsUsedOnceAndAnUnknownOneIsRefused() {
    byte[] ticket = putTicket(1);
    BulkTickets.Ticket redeemed = tickets.redeem(ticket);
    assertEquals(BulkTickets.Direction.PUT, redeemed.direction());
    assertEquals(ada, redeemed.caller());
    redeemed.upload().close();
    assertTrue(assertThrows(IllegalArgumentException.class, () -> tickets.redeem(ticket))
        .getMessage().contains("already used"));
    assertTrue(assertThrows(IllegalArgumentException.class,
        () -> tickets.redeem(new byte[BulkTickets.TICKET_BYTES])).getMessage()
        .contains("unknown transfer ticket"));
  }

  @Test
  void anExpiredUploadTicketGivesItsRoomBackWhenSwept() {
    byte[] ticket = putTicket(2);
    ObjectKey other = ObjectKey.of("ada", String.format("%032x", 3));
    // The whole capacity is reserved by the unused ticket.
    assertThrows(StoreFullException.class, () -> store.beginUpload(other, CAPACITY));
    now.addAndGet(Duration.ofSeconds(59).toNanos());
    tickets.sweep();
    assertEquals(1, tickets.openCount());
    now.addAndGet(Duration.ofSeconds(2).toNanos());
    tickets.sweep();
    assertEquals(0, tickets.openCount());
    store.beginUpload(other, CAPACITY).close(); // the room is free again
    assertTrue(assertThrows(IllegalArgumentException.class, () -> tickets.redeem(ticket))
        .getMessage().contains("expired"));
  }

  @Test
  void anExpiredTicketRedeemedBeforeTheSweepIsRefusedAndFreed() {
    byte[] ticket = putTicket(4);
    now.addAndGet(Duration.ofSeconds(61).toNanos());
    assertTrue(assertThrows(IllegalArgumentException.class, () -> tickets.redeem(ticket))
        .getMessage().contains("expired"));
    tickets.sweep(); // nothing left to free twice
    store.beginUpload(ObjectKey.of("ada", String.format("%032x", 5)), CAPACITY).close();
  }
}
