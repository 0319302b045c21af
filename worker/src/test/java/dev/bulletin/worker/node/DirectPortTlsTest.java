package dev.bulletin.worker.node;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.bridge.ObjectStores;
import dev.bulletin.bridge.StoreOptions;
import dev.bulletin.bridge.dataport.DirectTicket;
import dev.bulletin.worker.tls.JdkContexts;
import dev.bulletin.worker.tls.PinnedTrust;
import dev.bulletin.worker.tls.PortIdentity;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.SSLServerSocket;
import javax.net.ssl.SSLSocket;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A worker's data port speaking TLS with its own self-signed certificate, and readers that pin
 * the certificate's fingerprint (as the head hands it out with each ticket), on real loopback
 * sockets. The object arrives whole; a peer with another certificate is refused in the handshake
 * and never receives the ticket (the same ticket then still works with the real keeper); a
 * plaintext reader gets nothing from a TLS port.
 */
class DirectPortTlsTest {
  @TempDir Path folder;
  private ObjectStore keeperStore;
  private ObjectStore readerStore;
  private final PortIdentity identity = PortIdentity.generate("worker-a");
  private final PinnedTrust pins = new PinnedTrust();
  private DirectPort keeper;
  private BulkClient reader;
  private final byte[] key = DirectTicket.newKey();
  private ObjectKey object;
  private byte[] payload;

  @BeforeEach
  void start() throws IOException {
    keeperStore = ObjectStores.open(new StoreOptions(folder.resolve("a"), 64 << 20, null));
    readerStore = ObjectStores.open(new StoreOptions(folder.resolve("b"), 64 << 20, null));
    keeper = DirectPort.start("127.0.0.1", keeperStore, identity.serverEngines());
    keeper.ticketKey(key);
    reader = new BulkClient(readerStore, null);
    payload = new byte[5 << 20];
    new Random(11).nextBytes(payload);
    object = keeperStore.put(ObjectKey.of("alice", "00112233445566778899aabbccddeeff"),
        ByteBuffer.wrap(payload));
  }

  @AfterEach
  void stop() {
    reader.close();
    keeper.close();
    keeperStore.close();
    readerStore.close();
  }

  private InetSocketAddress address() {
    return new InetSocketAddress("127.0.0.1", keeper.port());
  }

  private byte[] request() {
    return DirectTicket.request("worker-b", object, DirectTicket.sign(key, object, "worker-b",
        System.currentTimeMillis() + 60_000));
  }

  private byte[] stored(ObjectKey got) {
    ByteBuffer stored = readerStore.read(got);
    byte[] bytes = new byte[stored.remaining()];
    stored.get(bytes);
    return bytes;
  }

  @Test
  void aPinnedReaderReceivesTheObjectOverTls() throws IOException {
    ObjectKey got = reader.getDirect(address(), request(), object,
        pins.enginesFor(identity.fingerprint()));
    assertArrayEquals(payload, stored(got));
    assertEquals(payload.length, keeper.servedBytes());
  }

  @Test
  void aKeeperWithAnotherCertificateIsRefusedAndNeverSeesTheTicket() throws Exception {
    // An impostor at some address, with a certificate of its own: what the handshake lets
    // through to it is counted.
    PortIdentity impostorIdentity = PortIdentity.generate("impostor");
    try (SSLServerSocket impostor = (SSLServerSocket) JdkContexts.serving(impostorIdentity)
        .getServerSocketFactory().createServerSocket(0, 8,
            java.net.InetAddress.getLoopbackAddress())) {
      CompletableFuture<Integer> received = CompletableFuture.supplyAsync(() -> {
        try (SSLSocket accepted = (SSLSocket) impostor.accept()) {
          accepted.setSoTimeout(10_000);
          InputStream in = accepted.getInputStream();
          int count = 0;
          try {
            while (in.read() >= 0) {
              count++;
            }
          } catch (IOException handshakeFailed) {
            // The reader aborted the handshake: nothing more comes.
          }
          return count;
        } catch (IOException e) {
          return -1;
        }
      });
      byte[] request = request();
      IOException refused = assertThrows(IOException.class, () -> reader.getDirect(
          new InetSocketAddress("127.0.0.1", impostor.getLocalPort()), request, object,
          pins.enginesFor(identity.fingerprint())));
      assertTrue(refused.getMessage().contains(PinnedTrust.hex(identity.fingerprint())),
          refused.getMessage());
      assertFalse(readerStore.contains(object));
      assertEquals(0, received.get(20, TimeUnit.SECONDS), "no application byte reached it");
      // The ticket was not spent anywhere: the real keeper still takes it.
      assertArrayEquals(payload, stored(reader.getDirect(address(), request, object,
          pins.enginesFor(identity.fingerprint()))));
    }
  }

  @Test
  void aReaderPinningAnotherCertificateRefusesTheRealKeeper() {
    byte[] otherPin = PortIdentity.generate("worker-c").fingerprint();
    IOException refused = assertThrows(IOException.class, () -> reader.getDirect(address(),
        request(), object, pins.enginesFor(otherPin)));
    assertTrue(refused.getMessage().contains("not the worker the ticket is for"),
        refused.getMessage());
    assertEquals(0, keeper.servedBytes());
  }

  @Test
  void aPlaintextReaderGetsNothingFromATlsPort() throws IOException {
    byte[] request = request();
    assertThrows(IOException.class, () -> reader.getDirect(address(), request, object, null));
    assertFalse(readerStore.contains(object));
    assertEquals(0, keeper.servedBytes());
    // Its header was not taken as a ticket: the same request still works over TLS.
    assertArrayEquals(payload, stored(reader.getDirect(address(), request, object,
        pins.enginesFor(identity.fingerprint()))));
  }

  @Test
  void aPinIsASha256() {
    IllegalArgumentException wrong = assertThrows(IllegalArgumentException.class,
        () -> pins.enginesFor(new byte[5]));
    assertTrue(wrong.getMessage().contains("32 bytes"), wrong.getMessage());
    assertEquals(32, identity.fingerprint().length);
    assertArrayEquals(identity.fingerprint(), PinnedTrust.fingerprint(identity.certificate()));
  }
}
