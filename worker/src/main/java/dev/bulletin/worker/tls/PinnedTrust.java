package dev.bulletin.worker.tls;

import dev.bulletin.bridge.dataport.TlsEngines;
import java.net.Socket;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.security.cert.CertificateEncodingException;
import java.security.cert.CertificateException;
import java.security.cert.X509Certificate;
import java.util.HexFormat;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.X509ExtendedTrustManager;

/**
 * The reading side of a worker's TLS data port: trusts exactly the keeper, either by its worker
 * certificate (the cluster CA's, naming the keeper's id: {@link #enginesForWorker}) or, for a
 * worker without one, by the one certificate whose SHA-256 fingerprint the head handed out with
 * the ticket ({@link PortIdentity}). The check runs
 * inside the handshake, and a TLS session carries no application byte before its handshake ends,
 * so a peer with any other certificate (an impostor at the keeper's address) fails the handshake
 * and never sees the ticket. Engines are kept per fingerprint (a few keepers), so that sessions
 * with one keeper can be resumed. Thread-safe.
 */
public final class PinnedTrust {
  private static final int FINGERPRINT_BYTES = 32;
  /** Beyond this many keepers remembered, the cache starts again (keepers come and go). */
  private static final int MAX_PINS = 1024;

  private final Map<String, TlsEngines> engines = new ConcurrentHashMap<>();

  /** Client engines that accept only the certificate with this SHA-256 fingerprint. */
  public TlsEngines enginesFor(byte[] fingerprint) {
    if (fingerprint.length != FINGERPRINT_BYTES) {
      throw new IllegalArgumentException("a certificate pin is a SHA-256 digest of "
          + FINGERPRINT_BYTES + " bytes, got " + fingerprint.length);
    }
    String hex = hex(fingerprint);
    if (engines.size() > MAX_PINS) {
      engines.clear();
    }
    return engines.computeIfAbsent(hex, unused -> DataTls.client(pinned(fingerprint)));
  }

  /**
   * Client engines that accept only a certificate the cluster CA {@code ca} issued to worker
   * {@code workerId}, valid now ({@link WorkerPeers}, the runtime's own check): a keeper whose
   * port serves its worker certificate, which changes at every renewal, so no pin.
   */
  public TlsEngines enginesForWorker(X509Certificate ca, String workerId) {
    if (engines.size() > MAX_PINS) {
      engines.clear();
    }
    return engines.computeIfAbsent("worker:" + workerId, unused -> DataTls.client(
        new ServerOnly(chain -> {
          if (WorkerPeers.check(java.util.List.of(chain), ca, workerId, id -> false,
              java.time.Instant.now()) instanceof WorkerPeers.Verdict.Refused refused) {
            throw new CertificateException("the keeper's data port is not worker " + workerId
                + "'s: " + refused.reason());
          }
        })));
  }

  /** The trust manager that accepts only the certificate with this SHA-256 fingerprint. */
  static X509ExtendedTrustManager pinned(byte[] fingerprint) {
    byte[] pin = fingerprint.clone();
    return new ServerOnly(chain -> {
      byte[] got = fingerprint(chain[0]);
      if (!MessageDigest.isEqual(got, pin)) {
        throw new CertificateException("the keeper's certificate has SHA-256 " + hex(got)
            + ", not " + hex(pin) + " (the one the head gave with the ticket): not the worker"
            + " the ticket is for");
      }
    });
  }

  /** A check of a server's chain (leaf first, never empty), inside the handshake. */
  @FunctionalInterface
  interface ServerCheck {
    void check(X509Certificate[] chain) throws CertificateException;
  }

  /** SHA-256 of a certificate's DER encoding. */
  public static byte[] fingerprint(X509Certificate certificate) {
    try {
      return MessageDigest.getInstance("SHA-256").digest(certificate.getEncoded());
    } catch (NoSuchAlgorithmException | CertificateEncodingException e) {
      throw new IllegalStateException("cannot take a certificate's SHA-256: " + e, e);
    }
  }

  public static String hex(byte[] fingerprint) {
    return HexFormat.of().formatHex(fingerprint);
  }

  /**
   * Runs a {@link ServerCheck} on the keeper's chain. An extended trust manager: the JDK then
   * adds no checks of its own (host names: a worker's port is dialled by address, and its
   * certificate names a worker, not a host), which have no meaning here.
   */
  private static final class ServerOnly extends X509ExtendedTrustManager {
    private final ServerCheck checker;

    ServerOnly(ServerCheck checker) {
      this.checker = checker;
    }

    private void check(X509Certificate[] chain) throws CertificateException {
      if (chain == null || chain.length == 0) {
        throw new CertificateException("the keeper presented no certificate");
      }
      checker.check(chain);
    }

    @Override
    public void checkServerTrusted(X509Certificate[] chain, String authType, SSLEngine engine)
        throws CertificateException {
      check(chain);
    }

    @Override
    public void checkServerTrusted(X509Certificate[] chain, String authType, Socket socket)
        throws CertificateException {
      check(chain);
    }

    @Override
    public void checkServerTrusted(X509Certificate[] chain, String authType)
        throws CertificateException {
      check(chain);
    }

    @Override
    public void checkClientTrusted(X509Certificate[] chain, String authType, SSLEngine engine)
        throws CertificateException {
      throw new CertificateException("a data port reader's context checks servers only");
    }

    @Override
    public void checkClientTrusted(X509Certificate[] chain, String authType, Socket socket)
        throws CertificateException {
      throw new CertificateException("a data port reader's context checks servers only");
    }

    @Override
    public void checkClientTrusted(X509Certificate[] chain, String authType)
        throws CertificateException {
      throw new CertificateException("a data port reader's context checks servers only");
    }

    @Override
    public X509Certificate[] getAcceptedIssuers() {
      return new X509Certificate[0];
    }
  }
}
