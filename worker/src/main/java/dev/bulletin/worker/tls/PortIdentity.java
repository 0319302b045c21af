package dev.bulletin.worker.tls;

import dev.bulletin.bridge.dataport.TlsEngines;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.KeyPair;
import java.security.KeyPairGenerator;
import java.security.KeyStore;
import java.security.SecureRandom;
import java.security.Signature;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.security.spec.ECGenParameterSpec;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import javax.net.ssl.KeyManagerFactory;

/**
 * The TLS identity of a worker's own data port: an EC P-256 key made when the worker starts and
 * a self-signed certificate for it, both kept in this process's memory only (no file, no CA).
 * Nobody checks the certificate against a CA: the worker sends its SHA-256 fingerprint to the
 * head over its TLS-authenticated Attach stream, and the head hands that fingerprint with every
 * ticket for this port, so a reader accepts exactly this certificate ({@link PinnedTrust}).
 * A new start is a new key: nothing to rotate, nothing to revoke.
 */
public final class PortIdentity {
  /** The certificate's lifetime is not what protects it (the pin is); long enough to ignore. */
  private static final Duration VALIDITY = Duration.ofDays(3650);
  private static final char[] NO_PASSWORD = new char[0];
  private static final DateTimeFormatter UTC_TIME =
      DateTimeFormatter.ofPattern("yyMMddHHmmss'Z'").withZone(ZoneOffset.UTC);

  private final X509Certificate certificate;
  private final byte[] fingerprint;
  private final KeyManagerFactory keys;
  private final TlsEngines serverEngines;

  private PortIdentity(KeyPair keys, X509Certificate certificate) throws GeneralSecurityException {
    this.certificate = certificate;
    this.fingerprint = PinnedTrust.fingerprint(certificate);
    KeyStore store = KeyStore.getInstance("PKCS12");
    try {
      store.load(null, null);
    } catch (java.io.IOException e) {
      throw new GeneralSecurityException(e);
    }
    store.setKeyEntry("port", keys.getPrivate(), NO_PASSWORD, new Certificate[] {certificate});
    KeyManagerFactory managers = KeyManagerFactory.getInstance(
        KeyManagerFactory.getDefaultAlgorithm());
    managers.init(store, NO_PASSWORD);
    this.keys = managers;
    this.serverEngines = DataTls.server(managers);
  }

  /** A fresh key and certificate naming {@code name} (the worker's id, for people reading it). */
  public static PortIdentity generate(String name) {
    try {
      KeyPairGenerator generator = KeyPairGenerator.getInstance("EC");
      generator.initialize(new ECGenParameterSpec("secp256r1"));
      KeyPair keys = generator.generateKeyPair();
      return new PortIdentity(keys, selfSigned(keys, "bulletin worker " + name));
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("cannot make the data port's TLS key (EC P-256): " + e, e);
    }
  }

  /** SHA-256 of the certificate's DER encoding: what readers pin. */
  public byte[] fingerprint() {
    return fingerprint.clone();
  }

  public X509Certificate certificate() {
    return certificate;
  }

  /** The data port server's engines: they present this certificate and ask for none. */
  public TlsEngines serverEngines() {
    return serverEngines;
  }

  /** This identity's key and certificate, for a JDK context (tests that play an impostor). */
  public KeyManagerFactory keyManagers() {
    return keys;
  }

  /**
   * An X.509 v1 certificate (no extensions: nothing reads them), issuer = subject = CN=name,
   * signed with its own key. The JDK can parse and use certificates but has no public API to
   * make one, so its DER is written here.
   */
  static X509Certificate selfSigned(KeyPair keys, String name) throws GeneralSecurityException {
    byte[] ecdsaWithSha256 = Der.sequence(Der.oid(new int[] {1, 2, 840, 10045, 4, 3, 2}));
    byte[] commonName = Der.sequence(Der.set(Der.sequence(
        Der.oid(new int[] {2, 5, 4, 3}), Der.utf8(name))));
    Instant now = Instant.now();
    byte[] serial = new byte[16];
    new SecureRandom().nextBytes(serial);
    serial[0] &= 0x7f; // a positive INTEGER
    byte[] tbs = Der.sequence(
        Der.integer(new BigInteger(1, serial)),
        ecdsaWithSha256,
        commonName,
        Der.sequence(Der.utcTime(UTC_TIME.format(now.minus(Duration.ofDays(1)))),
            Der.utcTime(UTC_TIME.format(now.plus(VALIDITY)))),
        commonName,
        keys.getPublic().getEncoded()); // already a SubjectPublicKeyInfo
    Signature signer = Signature.getInstance("SHA256withECDSA");
    signer.initSign(keys.getPrivate());
    signer.update(tbs);
    byte[] der = Der.sequence(tbs, ecdsaWithSha256, Der.bitString(signer.sign()));
    return (X509Certificate) CertificateFactory.getInstance("X.509")
        .generateCertificate(new ByteArrayInputStream(der));
  }

  /** The few DER encodings a certificate needs (definite lengths, X.690). */
  static final class Der {
    private Der() {}

    static byte[] sequence(byte[]... parts) {
      return tagged(0x30, concat(parts));
    }

    static byte[] set(byte[]... parts) {
      return tagged(0x31, concat(parts));
    }

    static byte[] integer(BigInteger value) {
      return tagged(0x02, value.toByteArray());
    }

    static byte[] utf8(String text) {
      return tagged(0x0c, text.getBytes(StandardCharsets.UTF_8));
    }

    static byte[] utcTime(String time) {
      return tagged(0x17, time.getBytes(StandardCharsets.US_ASCII));
    }

    static byte[] bitString(byte[] bits) {
      byte[] content = new byte[bits.length + 1]; // leading 0: no unused bits
      System.arraycopy(bits, 0, content, 1, bits.length);
      return tagged(0x03, content);
    }

    static byte[] oid(int[] arcs) {
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      out.write(arcs[0] * 40 + arcs[1]);
      for (int i = 2; i < arcs.length; i++) {
        int arc = arcs[i];
        int groups = 1;
        for (int rest = arc >>> 7; rest != 0; rest >>>= 7) {
          groups++;
        }
        for (int g = groups - 1; g >= 0; g--) {
          out.write(((arc >>> (7 * g)) & 0x7f) | (g > 0 ? 0x80 : 0));
        }
      }
      return tagged(0x06, out.toByteArray());
    }

    private static byte[] tagged(int tag, byte[] content) {
      ByteArrayOutputStream out = new ByteArrayOutputStream(content.length + 6);
      out.write(tag);
      int length = content.length;
      if (length < 0x80) {
        out.write(length);
      } else {
        int bytes = (32 - Integer.numberOfLeadingZeros(length) + 7) / 8;
        out.write(0x80 | bytes);
        for (int b = bytes - 1; b >= 0; b--) {
          out.write(length >>> (8 * b));
        }
      }
      out.writeBytes(content);
      return out.toByteArray();
    }

    private static byte[] concat(byte[]... parts) {
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      for (byte[] part : parts) {
        out.writeBytes(part);
      }
      return out.toByteArray();
    }
  }
}
