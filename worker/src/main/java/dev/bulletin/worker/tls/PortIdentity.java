package dev.bulletin.worker.tls;

import java.util.Date;
import org.bouncycastle.asn1.x500.X500Name;
import org.bouncycastle.asn1.x500.X500NameBuilder;
import org.bouncycastle.asn1.x500.style.BCStyle;
import org.bouncycastle.cert.jcajce.JcaX509CertificateConverter;
import org.bouncycastle.cert.jcajce.JcaX509v1CertificateBuilder;
import org.bouncycastle.operator.OperatorCreationException;
import org.bouncycastle.operator.jcajce.JcaContentSignerBuilder;
import dev.bulletin.bridge.dataport.TlsEngines;
import java.math.BigInteger;
import java.security.GeneralSecurityException;
import java.security.KeyPair;
import java.security.KeyPairGenerator;
import java.security.KeyStore;
import java.security.SecureRandom;
import java.security.cert.Certificate;
import java.security.cert.X509Certificate;
import java.security.spec.ECGenParameterSpec;
import java.time.Duration;
import java.time.Instant;
import javax.net.ssl.KeyManagerFactory;

/**
 * The TLS identity of a worker's own data port: an EC P-256 key made when the worker starts and
 * a self-signed certificate for it, both kept in this process's memory only (no file, no CA).
 * Nobody checks the certificate against a CA: the worker sends its SHA-256 fingerprint to the
 * head over its TLS-authenticated Attach stream, and the head hands that fingerprint with every
 * ticket for this port, so a reader accepts exactly this certificate ({@link PinnedTrust}).
 * A new start is a new key: nothing to rotate, nothing to revoke. Only for workers without a
 * certificate of the cluster CA (a runtime served with your own certificate, which holds no CA
 * key to sign workers' with); a worker that joined serves its worker certificate instead.
 */
public final class PortIdentity {
  /** The certificate's lifetime is not what protects it (the pin is); long enough to ignore. */
  private static final Duration VALIDITY = Duration.ofDays(3650);
  private static final char[] NO_PASSWORD = new char[0];

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
   * A certificate with issuer = subject = CN=name, signed with its own key (Bouncy Castle's
   * builder, as the cluster CA's certificates are: no encoder of our own). Used where a worker
   * has no certificate of the cluster CA (a cluster served with your own certificate, no CA key
   * for the runtime): readers pin it.
   */
  static X509Certificate selfSigned(KeyPair keys, String name) throws GeneralSecurityException {
    Instant now = Instant.now();
    byte[] serial = new byte[16];
    new SecureRandom().nextBytes(serial);
    X500Name subject = new X500NameBuilder(BCStyle.INSTANCE).addRDN(BCStyle.CN, name).build();
    try {
      return new JcaX509CertificateConverter().getCertificate(new JcaX509v1CertificateBuilder(
          subject, new BigInteger(1, serial), Date.from(now.minus(Duration.ofDays(1))),
          Date.from(now.plus(VALIDITY)), subject, keys.getPublic())
          .build(new JcaContentSignerBuilder("SHA256withECDSA").build(keys.getPrivate())));
    } catch (OperatorCreationException e) {
      throw new GeneralSecurityException("cannot sign the data port's certificate: " + e, e);
    }
  }
}
