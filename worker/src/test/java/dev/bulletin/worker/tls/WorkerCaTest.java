package dev.bulletin.worker.tls;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.worker.tls.impl.BcWorkerCa;
import java.math.BigInteger;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.KeyPair;
import java.security.cert.CertPathValidator;
import java.security.cert.CertPathValidatorException;
import java.security.cert.CertificateFactory;
import java.security.cert.PKIXParameters;
import java.security.cert.TrustAnchor;
import java.security.cert.X509Certificate;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.Base64;
import java.util.Date;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import org.bouncycastle.asn1.pkcs.PKCSObjectIdentifiers;
import org.bouncycastle.asn1.x500.X500Name;
import org.bouncycastle.asn1.x509.BasicConstraints;
import org.bouncycastle.asn1.x509.Extension;
import org.bouncycastle.asn1.x509.ExtensionsGenerator;
import org.bouncycastle.asn1.x509.GeneralName;
import org.bouncycastle.asn1.x509.GeneralNames;
import org.bouncycastle.cert.jcajce.JcaX509CertificateConverter;
import org.bouncycastle.cert.jcajce.JcaX509v3CertificateBuilder;
import org.bouncycastle.operator.jcajce.JcaContentSignerBuilder;
import org.bouncycastle.pkcs.jcajce.JcaPKCS10CertificationRequestBuilder;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The cluster CA signing worker requests with Bouncy Castle, and what it refuses to sign. */
class WorkerCaTest {
  private static final Instant NOW = Instant.parse("2026-11-28T07:00:00Z");
  private static final Clock CLOCK = Clock.fixed(NOW, ZoneOffset.UTC);

  @Test
  void signsTheWorkersKeyForTheGivenIdAsALeafThatChainsToTheCa() throws Exception {
    WorkerCa ca = ca("cluster");
    WorkerKeys keys = WorkerKeys.generate();
    X509Certificate cert = issued(ca.sign("worker-a", keys.csr("worker-a")));

    assertEquals(keys.keyPair().getPublic(), cert.getPublicKey());
    assertEquals(Optional.of("worker-a"), WorkerCertificates.workerId(cert));
    assertEquals(-1, cert.getBasicConstraints(), "a worker certificate is no CA");
    assertEquals(Date.from(NOW.plus(Duration.ofHours(1))), cert.getNotAfter());
    assertTrue(cert.getExtendedKeyUsage().containsAll(
        List.of("1.3.6.1.5.5.7.3.1", "1.3.6.1.5.5.7.3.2")), "TLS server and client");
    validate(cert, ca.certificate());
  }

  @Test
  void aRequestForAnotherIdOrForCaRightsGetsOnlyTheTokensWorkerAsALeaf() throws Exception {
    WorkerCa ca = ca("cluster");
    WorkerKeys keys = WorkerKeys.generate();
    ExtensionsGenerator wanted = new ExtensionsGenerator();
    wanted.addExtension(Extension.basicConstraints, true, new BasicConstraints(true));
    wanted.addExtension(Extension.subjectAlternativeName, false, new GeneralNames(
        new GeneralName(GeneralName.uniformResourceIdentifier, WorkerCertificates.uri("b"))));
    String greedy = BcWorkerCa.pem(new JcaPKCS10CertificationRequestBuilder(
        new X500Name("CN=b"), keys.keyPair().getPublic())
        .addAttribute(PKCSObjectIdentifiers.pkcs_9_at_extensionRequest, wanted.generate())
        .build(new JcaContentSignerBuilder("SHA256withECDSA")
            .build(keys.keyPair().getPrivate())));

    X509Certificate cert = issued(ca.sign("a", greedy));

    assertEquals(Optional.of("a"), WorkerCertificates.workerId(cert));
    assertEquals(-1, cert.getBasicConstraints());
    assertTrue(cert.getSubjectX500Principal().getName().contains("CN=a"));
  }

  @Test
  void aRequestNotSignedByItsKeyIsRefused() {
    WorkerCa ca = ca("cluster");
    String pem = WorkerKeys.generate().csr("a");
    String body = pem.replaceAll("-----[A-Z ]+-----|\\s", "");
    byte[] der = Base64.getDecoder().decode(body);
    der[der.length - 5] ^= 1; // inside the signature
    String tampered = "-----BEGIN CERTIFICATE REQUEST-----\n"
        + Base64.getMimeEncoder().encodeToString(der) + "\n-----END CERTIFICATE REQUEST-----\n";

    WorkerCa.Issued refused = ca.sign("a", tampered);

    assertInstanceOf(WorkerCa.Issued.Refused.class, refused, refused.toString());
    assertInstanceOf(WorkerCa.Issued.Refused.class, ca.sign("a", "not pem"));
    assertInstanceOf(WorkerCa.Issued.Refused.class, ca.sign("", WorkerKeys.generate().csr("")));
  }

  @Test
  void aCertificateFromAnotherCaDoesNotChainToTheClusterCa() throws Exception {
    WorkerCa cluster = ca("cluster");
    WorkerCa other = ca("other");
    X509Certificate forged = issued(other.sign("a", WorkerKeys.generate().csr("a")));

    assertThrows(CertPathValidatorException.class, () -> validate(forged,
        cluster.certificate()));
  }

  @Test
  void thePrivateKeyIsWrittenOwnerOnlyAndNeverThroughALink(@TempDir Path dir) throws Exception {
    WorkerKeys keys = WorkerKeys.generate();
    Path target = Files.writeString(dir.resolve("target"), "keep me");
    Path key = dir.resolve("worker.key");
    Files.createSymbolicLink(key, target);

    keys.writePrivateKey(key);

    assertEquals("keep me", Files.readString(target));
    assertFalse(Files.isSymbolicLink(key));
    assertEquals(Set.copyOf(PosixFilePermissions.fromString("rw-------")),
        Files.getPosixFilePermissions(key));
    assertTrue(Files.readString(key).startsWith("-----BEGIN PRIVATE KEY-----"));
  }

  private static X509Certificate issued(WorkerCa.Issued issued) {
    return assertInstanceOf(WorkerCa.Issued.Certificate.class, issued, issued.toString())
        .certificate();
  }

  private static void validate(X509Certificate leaf, X509Certificate anchor) throws Exception {
    PKIXParameters params = new PKIXParameters(Set.of(new TrustAnchor(anchor, null)));
    params.setRevocationEnabled(false);
    params.setDate(Date.from(NOW));
    CertPathValidator.getInstance("PKIX").validate(
        CertificateFactory.getInstance("X.509").generateCertPath(List.of(leaf)), params);
  }

  /** A CA like the one bulletin up makes: EC P-256, CA:true with path length 0. */
  private static WorkerCa ca(String name) {
    try {
      KeyPair keys = WorkerKeys.generate().keyPair();
      X500Name subject = new X500Name("O=bulletin,CN=" + name);
      X509Certificate cert = new JcaX509CertificateConverter().getCertificate(
          new JcaX509v3CertificateBuilder(subject, BigInteger.ONE,
              Date.from(NOW.minus(Duration.ofDays(1))), Date.from(NOW.plus(Duration.ofDays(9))),
              subject, keys.getPublic())
              .addExtension(Extension.basicConstraints, true, new BasicConstraints(0))
              .build(new JcaContentSignerBuilder("SHA256withECDSA").build(keys.getPrivate())));
      return BcWorkerCa.of(cert, keys.getPrivate(), Duration.ofHours(1), CLOCK);
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }
}
