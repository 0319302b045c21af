package dev.bulletin.runtime.dataport;

import dev.bulletin.bridge.dataport.BulkWire;
import dev.bulletin.bridge.dataport.HeaderGate;
import dev.bulletin.runtime.objects.ObjectApi;
import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.HexFormat;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.LongSupplier;

/**
 * Single-use, expiring tickets for the bulk data port. OpenTransfer (on the control plane's
 * loop) issues one bound to the caller, the object and the direction; a data connection (on a
 * data thread) redeems it at most once. A PUT ticket owns the upload that reserved the room:
 * whoever takes the ticket out of the table (the connection, or the sweep when it expires)
 * finishes or closes that upload, so the room is freed exactly once. Thread-safe.
 */
public final class BulkTickets implements HeaderGate.Redeemer<BulkTickets.Ticket> {
  static final int TICKET_BYTES = 32;

  public enum Direction { PUT, GET }

  /** What a ticket allows; {@code upload} is the reserved room of a PUT, null for a GET. */
  public record Ticket(Direction direction, ObjectApi.Caller caller, ObjectKey key, long size,
      ObjectStore.Upload upload, long expiresAtNanos) {}

  /** A ticket that can no longer be used, kept a while to say why. */
  private record Spent(String reason, long atNanos) {}

  private final SecureRandom random = new SecureRandom();
  private final Map<String, Ticket> open = new ConcurrentHashMap<>();
  private final Map<String, Spent> spent = new ConcurrentHashMap<>();
  private final Duration ttl;
  private final LongSupplier nanoTime;

  public BulkTickets(Duration ttl, LongSupplier nanoTime) {
    if (ttl.isNegative() || ttl.isZero()) {
      throw new IllegalArgumentException("ticket lifetime must be > 0, got " + ttl);
    }
    this.ttl = ttl;
    this.nanoTime = nanoTime;
  }

  public Duration ttl() {
    return ttl;
  }

  public byte[] issue(Direction direction, ObjectApi.Caller caller, ObjectKey key, long size,
      ObjectStore.Upload upload) {
    byte[] ticket = new byte[TICKET_BYTES];
    random.nextBytes(ticket);
    open.put(HexFormat.of().formatHex(ticket), new Ticket(direction, caller, key, size, upload,
        nanoTime.getAsLong() + ttl.toNanos()));
    return ticket;
  }

  @Override
  public int ticketBytes(int version) {
    if (version != BulkWire.VERSION) {
      throw new IllegalArgumentException("not a bulletin data connection of version "
          + BulkWire.VERSION + " (upgrade the client)");
    }
    return TICKET_BYTES;
  }

  @Override
  public Ticket redeem(int version, byte[] ticket) {
    return redeem(ticket);
  }

  /**
   * Takes a ticket out of the table: the caller now owns its upload.
   *
   * @throws IllegalArgumentException saying why the ticket is refused (unknown, used, expired)
   */
  Ticket redeem(byte[] ticket) {
    String id = HexFormat.of().formatHex(ticket);
    Ticket found = open.remove(id);
    if (found == null) {
      Spent why = spent.get(id);
      throw new IllegalArgumentException(why != null ? "this transfer ticket " + why.reason()
          : "unknown transfer ticket (not issued by this runtime, or long expired)");
    }
    if (nanoTime.getAsLong() - found.expiresAtNanos() > 0) {
      expire(id, found);
      throw new IllegalArgumentException("this transfer ticket expired (tickets live "
          + seconds() + " s); ask for a new one");
    }
    spent.put(id, new Spent("was already used (tickets are single-use)", nanoTime.getAsLong()));
    return found;
  }

  /** Drops expired tickets (freeing a PUT's room) and forgets old spent ones. */
  void sweep() {
    long now = nanoTime.getAsLong();
    open.forEach((id, ticket) -> {
      if (now - ticket.expiresAtNanos() > 0 && open.remove(id, ticket)) {
        expire(id, ticket);
      }
    });
    spent.values().removeIf(s -> now - s.atNanos() > 10 * ttl.toNanos());
  }

  /** Refuses every open ticket (the runtime stops). */
  void closeAll() {
    open.forEach((id, ticket) -> {
      if (open.remove(id, ticket)) {
        expire(id, ticket);
      }
    });
  }

  private String seconds() {
    return String.valueOf(ttl.toMillis() / 1000.0);
  }

  int openCount() {
    return open.size();
  }

  private void expire(String id, Ticket ticket) {
    spent.put(id, new Spent("expired (tickets live " + seconds() + " s)",
        nanoTime.getAsLong()));
    if (ticket.upload() != null) {
      ticket.upload().close();
    }
  }
}
