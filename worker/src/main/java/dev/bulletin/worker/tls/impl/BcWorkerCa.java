package dev.bulletin.worker.tls.impl;

import dev.bulletin.worker.tls.WorkerCa;
import dev.bulletin.worker.tls.WorkerCertificates;
import java.io.IOException;
import java.io.StringReader;
import java.io.StringWriter;
import java.math.BigInteger;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.PrivateKey;
import java.security.PublicKey;
import java.security.SecureRandom;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.security.interfaces.ECPublicKey;
import java.security.interfaces.RSAPublicKey;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.Date;
import org.bouncycastle.asn1.x500.X500NameBuilder;
import org.bouncycastle.asn1.x500.style.BCStyle;
import org.bouncycastle.asn1.x509.BasicConstraints;
import org.bouncycastle.asn1.x509.ExtendedKeyUsage;
import org.bouncycastle.asn1.x509.Extension;
import org.bouncycastle.asn1.x509.GeneralName;
import org.bouncycastle.asn1.x509.GeneralNames;
import org.bouncycastle.asn1.x509.KeyPurposeId;
import org.bouncycastle.asn1.x509.KeyUsage;
import org.bouncycastle.cert.X509v3CertificateBuilder;
import org.bouncycastle.cert.jcajce.JcaX509CertificateConverter;
import org.bouncycastle.cert.jcajce.JcaX509ExtensionUtils;
import org.bouncycastle.cert.jcajce.JcaX509v3CertificateBuilder;
import org.bouncycastle.openssl.PEMKeyPair;
import org.bouncycastle.openssl.PEMParser;
import org.bouncycastle.openssl.jcajce.JcaPEMKeyConverter;
import org.bouncycastle.openssl.jcajce.JcaPEMWriter;
import org.bouncycastle.operator.ContentSigner;
import org.bouncycastle.operator.OperatorCreationException;
import org.bouncycastle.operator.jcajce.JcaContentSignerBuilder;
import org.bouncycastle.operator.jcajce.JcaContentVerifierProviderBuilder;
import org.bouncycastle.pkcs.PKCSException;
import org.bouncycastle.pkcs.jcajce.JcaPKCS10CertificationRequest;
import org.bouncycastle.asn1.pkcs.PrivateKeyInfo;

/**
 * {@link WorkerCa} on Bouncy Castle's certificate builder and PKCS#10 parser. Of the request it
 * takes the public key only, after checking the request is signed by that key (the worker
 * holds it); every name and extension is written here: the worker's id as its one URI name and
 * its common name, not a CA ({@code CA:false}, critical), digital signature only, for TLS
 * clients and servers (the same certificate attaches to the runtime and serves the data port).
 */
public final class BcWorkerCa implements WorkerCa {
  private static final SecureRandom RANDOM = new SecureRandom();
  /** Clock skew between the runtime's host and a peer's should not make a new one not yet valid. */
  private static final Duration BACKDATE = Duration.ofMinutes(5);

  private final X509Certificate caCertificate;
  private final PrivateKey caKey;
  private final Duration lifetime;
  private final Clock clock;

  BcWorkerCa(X509Certificate caCertificate, PrivateKey caKey, Duration lifetime, Clock clock) {
    if (lifetime.isNegative() || lifetime.isZero()) {
      throw new IllegalArgumentException("worker certificate lifetime must be positive, not "
          + lifetime);
    }
    this.caCertificate = caCertificate;
    this.caKey = caKey;
    this.lifetime = lifetime;
    this.clock = clock;
  }

  /** The CA in {@code certificate} (PEM) and {@code privateKey} (PEM, PKCS#8 or SEC1). */
  public static BcWorkerCa load(Path certificate, Path privateKey, Duration lifetime)
      throws IOException, GeneralSecurityException {
    X509Certificate cert;
    try (var in = Files.newInputStream(certificate)) {
      cert = (X509Certificate) CertificateFactory.getInstance("X.509").generateCertificate(in);
    }
    if (cert.getBasicConstraints() < 0) {
      throw new GeneralSecurityException(certificate + " is not a CA certificate (no CA:true):"
          + " give --tls-ca the cluster CA that bulletin up made, or your own CA");
    }
    return new BcWorkerCa(cert, readKey(Files.readString(privateKey)), lifetime,
        Clock.systemUTC());
  }

  /** For tests: a CA over keys already in memory, on a clock the test sets. */
  public static BcWorkerCa of(X509Certificate certificate, PrivateKey key, Duration lifetime,
      Clock clock) {
    return new BcWorkerCa(certificate, key, lifetime, clock);
  }

  @Override
  public X509Certificate certificate() {
    return caCertificate;
  }

  @Override
  public Issued sign(String workerId, String csrPem) {
    if (workerId == null || workerId.isBlank() || workerId.length() > 128) {
      return new Issued.Refused("a worker id of 1 to 128 characters is needed");
    }
    PublicKey key;
    try {
      JcaPKCS10CertificationRequest csr = parse(csrPem);
      key = csr.getPublicKey();
      if (!csr.isSignatureValid(new JcaContentVerifierProviderBuilder().build(key))) {
        return new Issued.Refused("the request is not signed by the key it carries");
      }
    } catch (IOException | GeneralSecurityException | OperatorCreationException
        | PKCSException | IllegalArgumentException e) {
      return new Issued.Refused("not a PEM certificate signing request: " + e.getMessage());
    }
    String weak = weakness(key);
    if (weak != null) {
      return new Issued.Refused(weak);
    }
    try {
      X509Certificate cert = build(workerId, key);
      return new Issued.Certificate(cert, pem(cert));
    } catch (GeneralSecurityException | OperatorCreationException | IOException e) {
      throw new IllegalStateException("the cluster CA could not sign: " + e.getMessage(), e);
    }
  }

  private X509Certificate build(String workerId, PublicKey key)
      throws GeneralSecurityException, OperatorCreationException, IOException {
    Instant now = clock.instant();
    X509v3CertificateBuilder builder = new JcaX509v3CertificateBuilder(caCertificate,
        new BigInteger(127, RANDOM).add(BigInteger.ONE), Date.from(now.minus(BACKDATE)),
        Date.from(now.plus(lifetime)),
        new X500NameBuilder(BCStyle.INSTANCE).addRDN(BCStyle.O, "bulletin")
            .addRDN(BCStyle.CN, workerId).build(), key);
    JcaX509ExtensionUtils utils = new JcaX509ExtensionUtils();
    builder.addExtension(Extension.basicConstraints, true, new BasicConstraints(false))
        .addExtension(Extension.keyUsage, true, new KeyUsage(KeyUsage.digitalSignature))
        .addExtension(Extension.extendedKeyUsage, false, new ExtendedKeyUsage(
            new KeyPurposeId[] {KeyPurposeId.id_kp_clientAuth, KeyPurposeId.id_kp_serverAuth}))
        .addExtension(Extension.subjectAlternativeName, false, new GeneralNames(
            new GeneralName(GeneralName.uniformResourceIdentifier,
                WorkerCertificates.uri(workerId))))
        .addExtension(Extension.subjectKeyIdentifier, false,
            utils.createSubjectKeyIdentifier(key))
        .addExtension(Extension.authorityKeyIdentifier, false,
            utils.createAuthorityKeyIdentifier(caCertificate));
    String algorithm = caKey.getAlgorithm().equals("EC") ? "SHA256withECDSA" : "SHA256withRSA";
    ContentSigner signer = new JcaContentSignerBuilder(algorithm).build(caKey);
    return new JcaX509CertificateConverter().getCertificate(builder.build(signer));
  }

  private static String weakness(PublicKey key) {
    if (key instanceof ECPublicKey ec && ec.getParams().getCurve().getField().getFieldSize() < 256) {
      return "an EC key of at least 256 bits is needed";
    }
    if (key instanceof RSAPublicKey rsa && rsa.getModulus().bitLength() < 2048) {
      return "an RSA key of at least 2048 bits is needed";
    }
    if (!(key instanceof ECPublicKey) && !(key instanceof RSAPublicKey)) {
      return "an EC or RSA key is needed, not " + key.getAlgorithm();
    }
    return null;
  }

  private static JcaPKCS10CertificationRequest parse(String pem) throws IOException {
    try (PEMParser parser = new PEMParser(new StringReader(pem))) {
      Object read = parser.readObject();
      if (read instanceof org.bouncycastle.pkcs.PKCS10CertificationRequest request) {
        return new JcaPKCS10CertificationRequest(request);
      }
      throw new IOException("found " + (read == null ? "nothing" : read.getClass().getSimpleName()));
    }
  }

  static PrivateKey readKey(String pem) throws IOException {
    try (PEMParser parser = new PEMParser(new StringReader(pem))) {
      Object read = parser.readObject();
      JcaPEMKeyConverter converter = new JcaPEMKeyConverter();
      if (read instanceof PEMKeyPair pair) {
        return converter.getKeyPair(pair).getPrivate();
      }
      if (read instanceof PrivateKeyInfo info) {
        return converter.getPrivateKey(info);
      }
      throw new IOException("not an unencrypted PEM private key");
    }
  }

  /** PEM text of {@code object} (a certificate, a request, a key) through Bouncy Castle. */
  public static String pem(Object object) throws IOException {
    StringWriter out = new StringWriter();
    try (JcaPEMWriter writer = new JcaPEMWriter(out)) {
      writer.writeObject(object);
    }
    return out.toString();
  }
}
