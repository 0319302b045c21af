package dev.bulletin.bridge.dataport;

import dev.bulletin.bridge.ObjectKey;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.time.Instant;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.LongSupplier;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * Tickets for a worker's own data port: the head signs one per (object, reader, expiry) with a
 * key it handed the keeping worker at attach (over the worker's authenticated link), and the
 * keeping worker checks it without asking the head. Nobody without that key can mint a ticket
 * or change what one allows: its fields are under an HMAC-SHA256. Each ticket is used once.
 *
 * <pre>
 * ticket:  u8 format=1, UTF namespace, UTF id, UTF reader, i64 expiry (epoch ms),
 *          16-byte nonce, 32-byte HMAC-SHA256 of everything before it
 * request: UTF reader, UTF namespace, UTF id, u32 ticket length, ticket
 *          (sent as the header of a {@link BulkWire#VERSION_DIRECT} connection)
 * </pre>
 *
 * The expiry is read on the keeper's clock: hosts of one cluster keep their clocks in step
 * (NTP), as Slurm and TLS already require.
 */
public final class DirectTicket {
  public static final int KEY_BYTES = 32;
  private static final int FORMAT = 1;
  private static final int NONCE_BYTES = 16;
  private static final int MAC_BYTES = 32;
  private static final SecureRandom RANDOM = new SecureRandom();

  private DirectTicket() {}

  /** A fresh signing key for one worker. */
  public static byte[] newKey() {
    byte[] key = new byte[KEY_BYTES];
    RANDOM.nextBytes(key);
    return key;
  }

  /** A ticket for {@code reader} to fetch {@code object} from the worker whose key this is. */
  public static byte[] sign(byte[] key, ObjectKey object, String reader, long expiresAtMillis) {
    byte[] nonce = new byte[NONCE_BYTES];
    RANDOM.nextBytes(nonce);
    ByteArrayOutputStream bytes = new ByteArrayOutputStream(128);
    try (DataOutputStream out = new DataOutputStream(bytes)) {
      out.writeByte(FORMAT);
      out.writeUTF(object.namespace());
      out.writeUTF(object.id().hex());
      out.writeUTF(reader);
      out.writeLong(expiresAtMillis);
      out.write(nonce);
      out.write(mac(key, bytes.toByteArray()));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return bytes.toByteArray();
  }

  /** What a reader sends: who it is, what it wants, and the ticket the head gave it. */
  public static byte[] request(String reader, ObjectKey wanted, byte[] ticket) {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream(ticket.length + 96);
    try (DataOutputStream out = new DataOutputStream(bytes)) {
      out.writeUTF(reader);
      out.writeUTF(wanted.namespace());
      out.writeUTF(wanted.id().hex());
      out.writeInt(ticket.length);
      out.write(ticket);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return bytes.toByteArray();
  }

  private static byte[] mac(byte[] key, byte[] signed) {
    try {
      Mac mac = Mac.getInstance("HmacSHA256");
      mac.init(new SecretKeySpec(key, "HmacSHA256"));
      return mac.doFinal(signed);
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("HmacSHA256 is missing from this JVM", e);
    }
  }

  /**
   * The keeping worker's check, before it sends any byte: the signature under its key, the
   * object asked for, the reader, the expiry, and that the ticket was not used before. Every
   * refusal says which of these failed. Thread-safe.
   */
  public static final class Verifier {
    private final LongSupplier clockMillis;
    private volatile byte[] key;
    /** Nonces of used tickets, until their expiry (a replay is refused, then forgotten). */
    private final Map<String, Long> used = new ConcurrentHashMap<>();

    public Verifier(LongSupplier clockMillis) {
      this.clockMillis = clockMillis;
    }

    /** The key the head handed over at (re)attach; tickets under an earlier key stop working. */
    public void key(byte[] key) {
      this.key = key.clone();
    }

    /**
     * @return the object the request may read
     * @throws IllegalArgumentException saying why it may not
     */
    public ObjectKey check(byte[] request) {
      byte[] signingKey = key;
      if (signingKey == null) {
        throw new IllegalArgumentException("this worker has no ticket key yet (it is not"
            + " attached to a head); fetch the object through the head");
      }
      try (DataInputStream in = new DataInputStream(new ByteArrayInputStream(request))) {
        String reader = in.readUTF();
        ObjectKey wanted = ObjectKey.of(in.readUTF(), in.readUTF());
        int length = in.readInt();
        if (length <= NONCE_BYTES + MAC_BYTES || length > HeaderGate.MAX_TICKET_BYTES) {
          throw new IllegalArgumentException("malformed direct ticket (" + length + " bytes)");
        }
        byte[] ticket = in.readNBytes(length);
        return check(signingKey, reader, wanted, ticket);
      } catch (IOException e) {
        throw new IllegalArgumentException("malformed direct request: " + e.getMessage());
      }
    }

    private ObjectKey check(byte[] signingKey, String reader, ObjectKey wanted, byte[] ticket)
        throws IOException {
      int signedLength = ticket.length - MAC_BYTES;
      byte[] signed = Arrays.copyOf(ticket, signedLength);
      if (!MessageDigest.isEqual(mac(signingKey, signed),
          Arrays.copyOfRange(ticket, signedLength, ticket.length))) {
        throw new IllegalArgumentException("the ticket's signature is not this worker's (not"
            + " issued by this worker's head, for this worker, or altered); ask the head for a"
            + " new one");
      }
      DataInputStream in = new DataInputStream(new ByteArrayInputStream(signed));
      if (in.readUnsignedByte() != FORMAT) {
        throw new IllegalArgumentException("a direct ticket of an unknown format");
      }
      ObjectKey object = ObjectKey.of(in.readUTF(), in.readUTF());
      String allowed = in.readUTF();
      long expires = in.readLong();
      String nonce = HexFormat.of().formatHex(in.readNBytes(NONCE_BYTES));
      if (!object.equals(wanted)) {
        throw new IllegalArgumentException("the ticket is for object " + object + ", not "
            + wanted + "; a ticket allows one object only");
      }
      if (!allowed.equals(reader)) {
        throw new IllegalArgumentException("the ticket was issued to " + allowed + ", not "
            + reader + "; only its reader may use it");
      }
      long now = clockMillis.getAsLong();
      if (now > expires) {
        throw new IllegalArgumentException("the ticket expired at " + Instant.ofEpochMilli(
            expires) + " (it is " + Instant.ofEpochMilli(now) + " here); ask the head for a"
            + " new one");
      }
      used.values().removeIf(expiry -> expiry < now);
      if (used.putIfAbsent(nonce, expires) != null) {
        throw new IllegalArgumentException("the ticket was already used (tickets are"
            + " single-use); ask the head for a new one");
      }
      return object;
    }
  }
}
