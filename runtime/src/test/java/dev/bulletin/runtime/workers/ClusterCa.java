package dev.bulletin.runtime.workers;

import dev.bulletin.worker.tls.TlsOptions;
import dev.bulletin.worker.tls.WorkerKeys;
import dev.bulletin.worker.tls.impl.BcWorkerCa;
import java.math.BigInteger;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyPair;
import java.security.cert.X509Certificate;
import java.time.Duration;
import java.time.Instant;
import java.util.Date;
import org.bouncycastle.asn1.x500.X500Name;
import org.bouncycastle.asn1.x509.BasicConstraints;
import org.bouncycastle.asn1.x509.Extension;
import org.bouncycastle.asn1.x509.GeneralName;
import org.bouncycastle.asn1.x509.GeneralNames;
import org.bouncycastle.cert.jcajce.JcaX509CertificateConverter;
import org.bouncycastle.cert.jcajce.JcaX509v3CertificateBuilder;
import org.bouncycastle.openssl.jcajce.JcaPKCS8Generator;
import org.bouncycastle.operator.jcajce.JcaContentSignerBuilder;

/**
 * For tests: a cluster CA and the runtime's certificate from it (for 127.0.0.1 and localhost),
 * in PEM files, as `bulletin up --tls` makes them.
 */
record ClusterCa(Path ca, Path caKey, Path cert, Path key) {

  static ClusterCa make(Path folder) throws Exception {
    Files.createDirectories(folder);
    KeyPair caKeys = WorkerKeys.generate().keyPair();
    X500Name caName = new X500Name("O=bulletin,CN=test cluster CA");
    X509Certificate caCert = new JcaX509CertificateConverter().getCertificate(
        new JcaX509v3CertificateBuilder(caName, BigInteger.ONE, Date.from(Instant.now()
            .minus(Duration.ofDays(1))), Date.from(Instant.now().plus(Duration.ofDays(9))),
            caName, caKeys.getPublic())
            .addExtension(Extension.basicConstraints, true, new BasicConstraints(0))
            .build(new JcaContentSignerBuilder("SHA256withECDSA").build(caKeys.getPrivate())));
    KeyPair serverKeys = WorkerKeys.generate().keyPair();
    X509Certificate serverCert = new JcaX509CertificateConverter().getCertificate(
        new JcaX509v3CertificateBuilder(caCert, BigInteger.TWO, Date.from(Instant.now()
            .minusSeconds(60)), Date.from(Instant.now().plus(Duration.ofDays(1))),
            new X500Name("CN=localhost"), serverKeys.getPublic())
            .addExtension(Extension.subjectAlternativeName, false, new GeneralNames(
                new GeneralName[] {new GeneralName(GeneralName.dNSName, "localhost"),
                    new GeneralName(GeneralName.iPAddress, "127.0.0.1")}))
            .build(new JcaContentSignerBuilder("SHA256withECDSA").build(caKeys.getPrivate())));
    return new ClusterCa(write(folder.resolve("ca.pem"), BcWorkerCa.pem(caCert)),
        write(folder.resolve("ca-key.pem"),
            BcWorkerCa.pem(new JcaPKCS8Generator(caKeys.getPrivate(), null))),
        write(folder.resolve("server.pem"), BcWorkerCa.pem(serverCert)),
        write(folder.resolve("server-key.pem"),
            BcWorkerCa.pem(new JcaPKCS8Generator(serverKeys.getPrivate(), null))));
  }

  TlsOptions server() {
    return TlsOptions.server(cert, key, ca);
  }

  TlsOptions client() {
    return TlsOptions.client(ca);
  }

  private static Path write(Path file, String text) throws Exception {
    return Files.writeString(file, text);
  }
}
