package dev.bulletin.worker.tls;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.worker.tls.impl.BcWorkerCa;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpClientAgent;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.HttpServerOptions;
import java.math.BigInteger;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyPair;
import java.security.cert.Certificate;
import java.security.cert.X509Certificate;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.Date;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.SSLPeerUnverifiedException;
import org.bouncycastle.asn1.x500.X500Name;
import org.bouncycastle.asn1.x509.BasicConstraints;
import org.bouncycastle.asn1.x509.Extension;
import org.bouncycastle.asn1.x509.GeneralName;
import org.bouncycastle.asn1.x509.GeneralNames;
import org.bouncycastle.cert.jcajce.JcaX509CertificateConverter;
import org.bouncycastle.cert.jcajce.JcaX509v3CertificateBuilder;
import org.bouncycastle.openssl.jcajce.JcaPKCS8Generator;
import org.bouncycastle.operator.jcajce.JcaContentSignerBuilder;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Mutual TLS between a worker and the runtime's gRPC port options (TlsSetup), for real on
 * loopback: the server asks for the worker's certificate and {@link WorkerPeers} says who it is.
 */
@Timeout(60)
class WorkerMtlsTest {
  @TempDir Path dir;
  private final Vertx vertx = Vertx.vertx();
  private final Set<String> revoked = ConcurrentHashMap.newKeySet();
  private KeyPair caKeys;
  private X509Certificate caCert;
  private TlsOptions server;
  private int port;

  @BeforeEach
  void start() throws Exception {
    caKeys = WorkerKeys.generate().keyPair();
    caCert = selfSigned(caKeys, "cluster");
    Path ca = write("ca.pem", BcWorkerCa.pem(caCert));
    KeyPair serverKeys = WorkerKeys.generate().keyPair();
    X500Name subject = new X500Name("CN=localhost");
    X509Certificate serverCert = new JcaX509CertificateConverter().getCertificate(
        new JcaX509v3CertificateBuilder(caCert, BigInteger.TWO, Date.from(Instant.now()
            .minusSeconds(60)), Date.from(Instant.now().plusSeconds(3600)), subject,
            serverKeys.getPublic())
            .addExtension(Extension.subjectAlternativeName, false, new GeneralNames(
                new GeneralName(GeneralName.dNSName, "localhost")))
            .build(new JcaContentSignerBuilder("SHA256withECDSA").build(caKeys.getPrivate())));
    server = TlsOptions.server(write("server.pem", BcWorkerCa.pem(serverCert)),
        write("server.key", BcWorkerCa.pem(new JcaPKCS8Generator(serverKeys.getPrivate(), null))),
        ca);
    HttpServer http = vertx.createHttpServer(TlsSetup.serveAskingWorkers(
        new HttpServerOptions().setHost("127.0.0.1").setPort(0), server))
        .requestHandler(request -> {
          List<Certificate> chain;
          try {
            chain = request.connection().peerCertificates();
          } catch (SSLPeerUnverifiedException e) {
            chain = List.of();
          }
          WorkerPeers.Verdict verdict = WorkerPeers.check(chain, caCert,
              request.getHeader("worker-id"), revoked::contains, Instant.now());
          if (verdict instanceof WorkerPeers.Verdict.Worker worker) {
            request.response().end("worker " + worker.workerId());
          } else {
            request.response().setStatusCode(403)
                .end(((WorkerPeers.Verdict.Refused) verdict).reason());
          }
        });
    port = http.listen().toCompletionStage().toCompletableFuture().get(20, TimeUnit.SECONDS)
        .actualPort();
  }

  @AfterEach
  void stop() throws Exception {
    vertx.close().toCompletionStage().toCompletableFuture().get(20, TimeUnit.SECONDS);
  }

  @Test
  void aWorkerWithItsCertificateIsKnownByItsId() throws Exception {
    assertEquals("200 worker a", ask(joined("a", caKeys, caCert, Clock.systemUTC()), "a"));
  }

  @Test
  void aCertificateForAIsRefusedAsB() throws Exception {
    String answer = ask(joined("a", caKeys, caCert, Clock.systemUTC()), "b");
    assertTrue(answer.startsWith("403") && answer.contains("not b's"), answer);
  }

  @Test
  void aRevokedWorkerIsRefused() throws Exception {
    TlsOptions a = joined("a", caKeys, caCert, Clock.systemUTC());
    revoked.add("a");
    String answer = ask(a, "a");
    assertTrue(answer.startsWith("403") && answer.contains("revoked"), answer);
  }

  @Test
  void anExpiredCertificateIsRefused() throws Exception {
    // Issued two hours ago for one hour: no waiting for it to run out.
    Clock past = Clock.fixed(Instant.now().minus(Duration.ofHours(2)), ZoneOffset.UTC);
    assertNotEquals("200 worker a", ask(joined("a", caKeys, caCert, past), "a"));
  }

  @Test
  void aCertificateFromAnotherCaIsRefused() throws Exception {
    KeyPair otherKeys = WorkerKeys.generate().keyPair();
    X509Certificate other = selfSigned(otherKeys, "other");
    assertNotEquals("200 worker a", ask(joined("a", otherKeys, other, Clock.systemUTC()), "a"));
  }

  @Test
  void aClientWithoutCertificateIsNoWorker() throws Exception {
    String answer = ask(TlsOptions.client(server.ca()), "a");
    assertTrue(answer.startsWith("403") && answer.contains("no client certificate"), answer);
  }

  /** What the server answered ("status body"), or the failure's text. */
  private String ask(TlsOptions tls, String workerId) throws Exception {
    HttpClientAgent client = vertx.createHttpClient(TlsSetup.dial(tls));
    try {
      return client.request(HttpMethod.GET, port, "localhost", "/")
          .compose(request -> request.putHeader("worker-id", workerId).send())
          .compose(response -> response.body().map(body -> response.statusCode() + " " + body))
          .otherwise(error -> "failed " + error)
          .toCompletionStage().toCompletableFuture().get(20, TimeUnit.SECONDS);
    } finally {
      client.close();
    }
  }

  /** A worker's TLS after its join: its own key, a certificate from {@code ca}. */
  private TlsOptions joined(String id, KeyPair caKey, X509Certificate ca, Clock clock)
      throws Exception {
    WorkerKeys keys = WorkerKeys.generate();
    WorkerCa signer = BcWorkerCa.of(ca, caKey.getPrivate(), Duration.ofHours(1), clock);
    WorkerCa.Issued.Certificate issued = assertInstanceOf(WorkerCa.Issued.Certificate.class,
        signer.sign(id, keys.csr(id)));
    Path key = dir.resolve(id + "-" + System.nanoTime() + ".key");
    keys.writePrivateKey(key);
    return new TlsOptions(true, write(id + "-" + System.nanoTime() + ".pem", issued.pem()), key,
        server.ca());
  }

  private Path write(String name, String text) throws Exception {
    return Files.writeString(dir.resolve(name), text);
  }

  private static X509Certificate selfSigned(KeyPair keys, String name) throws Exception {
    X500Name subject = new X500Name("O=bulletin,CN=" + name);
    return new JcaX509CertificateConverter().getCertificate(new JcaX509v3CertificateBuilder(
        subject, BigInteger.ONE, Date.from(Instant.now().minus(Duration.ofDays(1))),
        Date.from(Instant.now().plus(Duration.ofDays(9))), subject, keys.getPublic())
        .addExtension(Extension.basicConstraints, true, new BasicConstraints(0))
        .build(new JcaContentSignerBuilder("SHA256withECDSA").build(keys.getPrivate())));
  }
}
