package dev.bulletin.bridge.dataport;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.bridge.ObjectKey;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The keeper's check of a direct ticket: a good one is taken once, and each way a ticket can be
 * wrong (another object, another reader, expired, a signature under another key or over changed
 * fields, used before) is refused with a message that names it.
 */
class DirectTicketTest {
  private static final ObjectKey ALICES = ObjectKey.of("alice", "0123456789abcdef0123456789abcdef");
  private static final ObjectKey OTHER = ObjectKey.of("alice", "fedcba9876543210fedcba9876543210");
  private final AtomicLong now = new AtomicLong(1_000_000);
  private final byte[] key = DirectTicket.newKey();
  private DirectTicket.Verifier verifier;

  @BeforeEach
  void keeper() {
    verifier = new DirectTicket.Verifier(now::get);
    verifier.key(key);
  }

  private byte[] ticket(ObjectKey object, String reader, long ttlMillis) {
    return DirectTicket.sign(key, object, reader, now.get() + ttlMillis);
  }

  private String refusal(byte[] request) {
    return assertThrows(IllegalArgumentException.class, () -> verifier.check(request))
        .getMessage();
  }

  @Test
  void aSignedTicketAllowsItsReaderItsObjectOnce() {
    byte[] ticket = ticket(ALICES, "worker-b", 60_000);
    assertEquals(ALICES, verifier.check(DirectTicket.request("worker-b", ALICES, ticket)));
    assertTrue(refusal(DirectTicket.request("worker-b", ALICES, ticket))
        .contains("already used"));
  }

  @Test
  void aTicketCannotBeReplayedForAnotherObject() {
    byte[] ticket = ticket(ALICES, "worker-b", 60_000);
    String why = refusal(DirectTicket.request("worker-b", OTHER, ticket));
    assertTrue(why.contains("is for object " + ALICES) && why.contains("one object only"), why);
    // Nor does it become one for the other object by editing the id inside it.
    byte[] edited = ticket.clone();
    int at = new String(edited, java.nio.charset.StandardCharsets.ISO_8859_1)
        .indexOf(ALICES.id().hex());
    edited[at] = (byte) 'f';
    assertTrue(refusal(DirectTicket.request("worker-b", ALICES, edited))
        .contains("signature is not this worker's"));
  }

  @Test
  void anotherReaderIsRefused() {
    byte[] ticket = ticket(ALICES, "worker-b", 60_000);
    String why = refusal(DirectTicket.request("worker-c", ALICES, ticket));
    assertTrue(why.contains("issued to worker-b, not worker-c"), why);
  }

  @Test
  void anExpiredTicketIsRefused() {
    byte[] ticket = ticket(ALICES, "worker-b", 60_000);
    now.addAndGet(60_001);
    String why = refusal(DirectTicket.request("worker-b", ALICES, ticket));
    assertTrue(why.contains("expired") && why.contains("ask the head for a new one"), why);
  }

  @Test
  void aTicketSignedWithAnotherKeyIsRefused() {
    // Another worker's key (the head gives each its own): its tickets are no good here.
    byte[] foreign = DirectTicket.sign(DirectTicket.newKey(), ALICES, "worker-b",
        now.get() + 60_000);
    assertTrue(refusal(DirectTicket.request("worker-b", ALICES, foreign))
        .contains("signature is not this worker's"));
    // A reattach brings a new key: tickets under the old one stop working.
    byte[] before = ticket(ALICES, "worker-b", 60_000);
    verifier.key(DirectTicket.newKey());
    assertTrue(refusal(DirectTicket.request("worker-b", ALICES, before))
        .contains("signature is not this worker's"));
  }

  @Test
  void aKeeperWithoutAKeyAndGarbageAreRefused() {
    DirectTicket.Verifier unattached = new DirectTicket.Verifier(now::get);
    byte[] ticket = ticket(ALICES, "worker-b", 60_000);
    assertTrue(assertThrows(IllegalArgumentException.class, () -> unattached.check(
        DirectTicket.request("worker-b", ALICES, ticket))).getMessage().contains("no ticket key"));
    assertTrue(refusal(new byte[] {1, 2, 3}).contains("malformed"));
    assertTrue(refusal(DirectTicket.request("worker-b", ALICES, new byte[8]))
        .contains("malformed"));
  }
}
