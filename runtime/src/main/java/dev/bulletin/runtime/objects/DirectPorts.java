package dev.bulletin.runtime.objects;

import com.google.protobuf.ByteString;
import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.dataport.DirectTicket;
import dev.bulletin.protocol.DirectSource;
import java.time.Duration;
import java.util.Collection;
import java.util.HashMap;
import java.util.Map;
import java.util.Optional;
import java.util.logging.Logger;

/**
 * The workers that serve their own data port, and the tickets for it: each such worker gets a
 * fresh signing key when it attaches (sent over its authenticated Attach stream), and the head
 * signs, per object and reader, a short-lived ticket that only that worker accepts. The head
 * issues one only where it decided the reader may read the object (a call of the object's
 * owner placed on the reader, or the owner's own OpenTransfer), so the keeping worker needs no
 * other check. In a TLS cluster each port has its worker's own certificate, whose fingerprint
 * (sent in the registration, over the TLS Attach stream) goes with every ticket: the reader pins
 * it. Used on the control plane's event loop only.
 */
public final class DirectPorts {
  private static final Logger LOG = Logger.getLogger(DirectPorts.class.getName());
  private static final int FINGERPRINT_BYTES = 32;

  /**
   * @param fingerprint SHA-256 of the port's certificate; empty for a plaintext port
   * @param certified the port presents its worker's CA-signed certificate (readers check it
   *     against the cluster CA and the worker's id, not a fingerprint)
   */
  private record Port(String address, byte[] key, ByteString fingerprint, boolean certified) {}

  private final Map<String, Port> ports = new HashMap<>();
  private Duration lifetime = Duration.ofSeconds(60);
  private long ticketsIssued;
  /** Whether the cluster speaks TLS: then a port is used only with its certificate's pin. */
  private boolean requireTls;

  /**
   * The cluster speaks TLS: a worker port announced without a certificate fingerprint (an older
   * worker) is not used, so no ticket or payload crosses the network in the clear.
   */
  public void requireTls(boolean requireTls) {
    this.requireTls = requireTls;
  }

  /** How long a ticket lives (the runtime's --ticket-seconds). */
  public void lifetime(Duration lifetime) {
    if (lifetime.isNegative() || lifetime.isZero()) {
      throw new IllegalArgumentException("ticket lifetime must be > 0, got " + lifetime);
    }
    this.lifetime = lifetime;
  }

  /**
   * A worker (re)attached: records its port and returns the key its tickets are signed with,
   * empty when it serves none (port 0) or cannot be used (no pin in a TLS cluster).
   *
   * @param fingerprint SHA-256 of the certificate the port presents (empty: plaintext)
   */
  public byte[] attach(String workerId, String host, int port, ByteString fingerprint) {
    return attach(workerId, host, port, fingerprint, false);
  }

  /**
   * As {@link #attach(String, String, int, ByteString)}; {@code certified}: the port presents
   * the worker's own certificate, which the cluster CA signed for its id.
   */
  public byte[] attach(String workerId, String host, int port, ByteString fingerprint,
      boolean certified) {
    ports.remove(workerId);
    if (port <= 0 || port > 65535 || host.isBlank()) {
      return new byte[0];
    }
    if (!fingerprint.isEmpty() && fingerprint.size() != FINGERPRINT_BYTES) {
      LOG.warning("worker " + workerId + " announced a data port certificate fingerprint of "
          + fingerprint.size() + " bytes (a SHA-256 has " + FINGERPRINT_BYTES + "); its objects"
          + " go through the head");
      return new byte[0];
    }
    if (requireTls && fingerprint.isEmpty() && !certified) {
      LOG.warning("worker " + workerId + " serves a plaintext data port in a cluster that"
          + " speaks TLS (an older worker?); its objects go through the head");
      return new byte[0];
    }
    byte[] key = DirectTicket.newKey();
    ports.put(workerId, new Port(host + ":" + port, key, fingerprint, certified));
    return key;
  }

  public void detach(String workerId) {
    ports.remove(workerId);
  }

  /** Whether the worker serves its own data port (and so also fetches from others'). */
  public boolean serves(String workerId) {
    return workerId != null && ports.containsKey(workerId);
  }

  /**
   * A keeper that can send to {@code readerWorker} directly (both serve a port: a worker
   * without one moves objects through the head only), or null; for a client (null reader),
   * any keeper that serves one.
   */
  String keeperFor(Collection<String> keepers, String readerWorker) {
    if (readerWorker != null && !serves(readerWorker)) {
      return null;
    }
    for (String keeper : keepers) {
      if (serves(keeper)) {
        return keeper;
      }
    }
    return null;
  }

  /**
   * A ticket for {@code reader} to fetch {@code key} from {@code keeper}'s port; empty when the
   * keeper (null: none) serves none.
   */
  public Optional<DirectSource> ticket(String keeper, ObjectKey key, String reader) {
    Port port = keeper == null ? null : ports.get(keeper);
    if (port == null) {
      return Optional.empty();
    }
    ticketsIssued++;
    byte[] ticket = DirectTicket.sign(port.key(), key, reader,
        System.currentTimeMillis() + lifetime.toMillis());
    return Optional.of(DirectSource.newBuilder().setAddress(port.address())
        .setTicket(ByteString.copyFrom(ticket)).setKeeper(keeper).setReader(reader)
        .setNamespace(key.namespace()).setTlsFingerprint(port.fingerprint())
        .setTlsWorkerCertificate(port.certified()).build());
  }

  public long ticketsIssued() {
    return ticketsIssued;
  }
}
