package dev.bulletin.worker.node;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.bridge.ObjectStores;
import dev.bulletin.bridge.StoreOptions;
import dev.bulletin.bridge.dataport.DirectTicket;
import dev.bulletin.worker.tls.DataTls;
import dev.bulletin.worker.tls.PinnedTrust;
import dev.bulletin.worker.tls.RenewableKeys;
import dev.bulletin.worker.tls.WorkerCa;
import dev.bulletin.worker.tls.WorkerKeys;
import dev.bulletin.worker.tls.impl.BcWorkerCa;
import io.vertx.core.Vertx;
import java.io.IOException;
import java.math.BigInteger;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyPair;
import java.security.cert.X509Certificate;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.Date;
import java.util.Random;
import org.bouncycastle.asn1.x500.X500Name;
import org.bouncycastle.asn1.x509.BasicConstraints;
import org.bouncycastle.asn1.x509.Extension;
import org.bouncycastle.cert.jcajce.JcaX509CertificateConverter;
import org.bouncycastle.cert.jcajce.JcaX509v3CertificateBuilder;
import org.bouncycastle.operator.jcajce.JcaContentSignerBuilder;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A worker's data port serving its own worker certificate (issued by the cluster CA, renewed
 * in place), and readers that check it against the CA and the keeper's id, on real loopback
 * sockets: the keeper's reader gets the object; a reader expecting another worker, or a port
 * presenting another worker's certificate, is refused in the handshake, the ticket unspent.
 */
class WorkerPortTlsTest {
  @TempDir Path folder;
  private final Vertx vertx = Vertx.vertx();
  private final PinnedTrust trust = new PinnedTrust();
  private X509Certificate caCert;
  private WorkerCa ca;
  private ObjectStore keeperStore;
  private ObjectStore readerStore;
  private DirectPort keeper;
  private RenewableKeys keys;
  private BulkClient reader;
  private final byte[] key = DirectTicket.newKey();
  private ObjectKey object;
  private byte[] payload;

  @BeforeEach
  void start() throws Exception {
    KeyPair caKeys = WorkerKeys.generate().keyPair();
    X500Name name = new X500Name("O=bulletin,CN=cluster");
    caCert = new JcaX509CertificateConverter().getCertificate(new JcaX509v3CertificateBuilder(
        name, BigInteger.ONE, Date.from(Instant.now().minus(Duration.ofDays(1))),
        Date.from(Instant.now().plus(Duration.ofDays(9))), name, caKeys.getPublic())
        .addExtension(Extension.basicConstraints, true, new BasicConstraints(0))
        .build(new JcaContentSignerBuilder("SHA256withECDSA").build(caKeys.getPrivate())));
    ca = BcWorkerCa.of(caCert, caKeys.getPrivate(), Duration.ofHours(1), Clock.systemUTC());
    keeperStore = ObjectStores.open(new StoreOptions(folder.resolve("a"), 64 << 20, null));
    readerStore = ObjectStores.open(new StoreOptions(folder.resolve("b"), 64 << 20, null));
    issue("worker-a", folder.resolve("port"));
    keys = new RenewableKeys(vertx, folder.resolve("port/worker.pem"),
        folder.resolve("port/worker-key.pem"));
    keeper = DirectPort.start("127.0.0.1", keeperStore, DataTls.server(keys));
    keeper.ticketKey(key);
    reader = new BulkClient(readerStore, null);
    payload = new byte[3 << 20];
    new Random(5).nextBytes(payload);
    object = keeperStore.put(ObjectKey.of("alice", "00112233445566778899aabbccddeeff"),
        ByteBuffer.wrap(payload));
  }

  @AfterEach
  void stop() {
    reader.close();
    keeper.close();
    keeperStore.close();
    readerStore.close();
    vertx.close();
  }

  /** A key and a certificate the CA signed for {@code workerId}, written into {@code into}. */
  private void issue(String workerId, Path into) throws Exception {
    Files.createDirectories(into);
    WorkerKeys workerKeys = WorkerKeys.generate();
    workerKeys.writePrivateKey(into.resolve("worker-key.pem"));
    WorkerCa.Issued issued = ca.sign(workerId, workerKeys.csr(workerId));
    Files.writeString(into.resolve("worker.pem"), ((WorkerCa.Issued.Certificate) issued).pem());
  }

  private InetSocketAddress address() {
    return new InetSocketAddress("127.0.0.1", keeper.port());
  }

  private byte[] request() {
    return DirectTicket.request("worker-r", object, DirectTicket.sign(key, object, "worker-r",
        System.currentTimeMillis() + 60_000));
  }

  private byte[] stored(ObjectKey got) {
    ByteBuffer stored = readerStore.read(got);
    byte[] bytes = new byte[stored.remaining()];
    stored.get(bytes);
    return bytes;
  }

  @Test
  void theKeepersReaderGetsTheObjectAfterARenewalToo() throws Exception {
    assertArrayEquals(payload, stored(reader.getDirect(address(), request(), object,
        trust.enginesForWorker(caCert, "worker-a"))));
    readerStore.release(object);
    issue("worker-a", folder.resolve("port")); // a renewal writes new files
    keys.reload();
    assertArrayEquals(payload, stored(reader.getDirect(address(), request(), object,
        trust.enginesForWorker(caCert, "worker-a"))));
  }

  @Test
  void aPortPresentingAnotherWorkersCertificateIsRefusedAndTheTicketUnspent() throws Exception {
    byte[] request = request();
    IOException refused = assertThrows(IOException.class, () -> reader.getDirect(address(),
        request, object, trust.enginesForWorker(caCert, "worker-b")));
    assertTrue(refused.getMessage().contains("not worker worker-b's"), refused.getMessage());
    assertFalse(readerStore.contains(object));
    // Worker b's certificate at a's port: a reader of a refuses it.
    issue("worker-b", folder.resolve("port"));
    keys.reload();
    assertThrows(IOException.class, () -> reader.getDirect(address(), request, object,
        trust.enginesForWorker(caCert, "worker-a")));
    issue("worker-a", folder.resolve("port"));
    keys.reload();
    assertArrayEquals(payload, stored(reader.getDirect(address(), request, object,
        trust.enginesForWorker(caCert, "worker-a"))));
  }
}
