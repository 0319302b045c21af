import dev.bulletin.worker.tls.WorkerCa;
import dev.bulletin.worker.tls.WorkerKeys;
import dev.bulletin.worker.tls.WorkerPeers;
import dev.bulletin.worker.tls.impl.BcWorkerCa;
import java.math.BigInteger;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyPair;
import java.security.cert.X509Certificate;
import java.time.Duration;
import java.time.Instant;
import java.util.Date;
import java.util.List;
import org.bouncycastle.asn1.x500.X500Name;
import org.bouncycastle.asn1.x509.BasicConstraints;
import org.bouncycastle.asn1.x509.Extension;
import org.bouncycastle.cert.jcajce.JcaX509CertificateConverter;
import org.bouncycastle.cert.jcajce.JcaX509v3CertificateBuilder;
import org.bouncycastle.operator.jcajce.JcaContentSignerBuilder;

/**
 * The runtime jar keeps only part of Bouncy Castle (runtime/pom.xml's shade filter): this runs
 * every path bulletin takes through it against the shaded jar itself (a CA loaded from PEM
 * files, a CSR, its signature, the key written, the peer check), so a class the filter dropped
 * shows here. Run: java -cp runtime/target/bulletin-runtime.jar THIS_FILE
 */
public class ShadedBouncyCastleSmoke {
  public static void main(String[] args) throws Exception {
    Path dir = Files.createTempDirectory("bc-smoke");
    KeyPair caKeys = WorkerKeys.generate().keyPair();
    X500Name name = new X500Name("O=bulletin,CN=smoke");
    X509Certificate ca = new JcaX509CertificateConverter().getCertificate(
        new JcaX509v3CertificateBuilder(name, BigInteger.ONE,
            Date.from(Instant.now().minusSeconds(60)), Date.from(Instant.now().plusSeconds(600)),
            name, caKeys.getPublic())
            .addExtension(Extension.basicConstraints, true, new BasicConstraints(0))
            .build(new JcaContentSignerBuilder("SHA256withECDSA").build(caKeys.getPrivate())));
    Path caPem = Files.writeString(dir.resolve("ca.pem"), BcWorkerCa.pem(ca));
    Path caKey = dir.resolve("ca-key.pem");
    Files.writeString(caKey, BcWorkerCa.pem(
        new org.bouncycastle.openssl.jcajce.JcaPKCS8Generator(caKeys.getPrivate(), null)));
    WorkerCa signer = WorkerCa.load(caPem, caKey, Duration.ofMinutes(5));
    WorkerKeys worker = WorkerKeys.generate();
    worker.writePrivateKey(dir.resolve("worker.key"));
    WorkerCa.Issued issued = signer.sign("smoke-worker", worker.csr("smoke-worker"));
    if (!(issued instanceof WorkerCa.Issued.Certificate cert)) {
      throw new AssertionError("not signed: " + issued);
    }
    WorkerPeers.Verdict verdict = WorkerPeers.check(List.of(cert.certificate()), ca,
        "smoke-worker", id -> false, Instant.now());
    if (!(verdict instanceof WorkerPeers.Verdict.Worker)) {
      throw new AssertionError("refused: " + verdict);
    }
    if (!(signer.sign("x", "garbage") instanceof WorkerCa.Issued.Refused)) {
      throw new AssertionError("garbage signed");
    }
    System.out.println("shaded Bouncy Castle: ok");
  }
}
