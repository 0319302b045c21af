package dev.bulletin.worker.tls;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.bridge.dataport.TlsChannel;
import dev.bulletin.bridge.dataport.TlsEngines;
import io.netty.handler.ssl.SslProvider;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.util.Locale;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.SSLException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

@Timeout(60)
class DataTlsTest {
  private static final PortIdentity KEEPER = PortIdentity.generate("keeper");

  @Test
  void linuxOnX86GetsBoringSsl() {
    String os = System.getProperty("os.name").toLowerCase(Locale.ROOT);
    String arch = System.getProperty("os.arch");
    boolean shipped = os.contains("linux")
        && (arch.equals("amd64") || arch.equals("x86_64"));
    // The native jar is in the worker's (and the shaded runtime's) dependencies for this one.
    assertEquals(shipped ? "boringssl" : "jdk", TlsEngine.name(), os + " " + arch);
    // gRPC takes the same library as the data ports.
    assertEquals(shipped, TlsEngine.vertx() instanceof io.vertx.core.net.OpenSSLEngineOptions);
  }

  /** Sides may run different libraries (a worker where BoringSSL does not load). */
  @ParameterizedTest(name = "keeper {0}, reader {1}")
  @CsvSource({"OPENSSL,OPENSSL", "OPENSSL,JDK", "JDK,OPENSSL", "JDK,JDK"})
  void eitherLibraryTalksToEitherAndBytesArriveIntact(SslProvider keeper, SslProvider reader)
      throws Exception {
    byte[] payload = new byte[3 << 20];
    new Random(7).nextBytes(payload);
    TlsEngines server = DataTls.server(KEEPER.keyManagers(), keeper);
    TlsEngines client = DataTls.client(PinnedTrust.pinned(KEEPER.fingerprint()), reader);
    assertArrayEquals(payload, send(server, client, payload));
  }

  @ParameterizedTest(name = "reader {0}")
  @CsvSource({"OPENSSL", "JDK"})
  void aReaderPinningAnotherCertificateSaysWhichOneItGot(SslProvider reader) throws Exception {
    PortIdentity other = PortIdentity.generate("other");
    TlsEngines server = DataTls.server(KEEPER.keyManagers(), SslProvider.OPENSSL);
    TlsEngines client = DataTls.client(PinnedTrust.pinned(other.fingerprint()), reader);
    SSLException refused = assertThrows(SSLException.class,
        () -> send(server, client, new byte[16]));
    // The reason, not "General OpenSslEngine problem" alone.
    assertTrue(refused.getMessage().contains(PinnedTrust.hex(KEEPER.fingerprint())),
        refused.getMessage());
  }

  /** Sends payload from a server channel to a client channel on loopback; what arrived. */
  private static byte[] send(TlsEngines server, TlsEngines client, byte[] payload)
      throws Exception {
    try (ServerSocketChannel listener = ServerSocketChannel.open()) {
      listener.bind(new InetSocketAddress("127.0.0.1", 0));
      CompletableFuture<Void> sent = CompletableFuture.runAsync(() -> {
        try (TlsChannel out = TlsChannel.server(listener.accept(), server)) {
          ByteBuffer bytes = ByteBuffer.wrap(payload);
          while (bytes.hasRemaining()) {
            out.write(bytes);
          }
          out.read(ByteBuffer.allocate(1)); // the reader's "done"
        } catch (IOException e) {
          throw new java.io.UncheckedIOException(e);
        }
      });
      SocketChannel socket = SocketChannel.open(listener.getLocalAddress());
      try (TlsChannel in = TlsChannel.client(socket, client, "127.0.0.1",
          socket.socket().getPort())) {
        ByteBuffer got = ByteBuffer.allocateDirect(payload.length);
        while (got.hasRemaining()) {
          if (in.read(got) < 0) {
            throw new IOException("the stream ended after " + got.position() + " bytes");
          }
        }
        in.write(ByteBuffer.wrap(new byte[] {1}));
        sent.get(30, TimeUnit.SECONDS);
        byte[] arrived = new byte[payload.length];
        got.flip().get(arrived);
        return arrived;
      } finally {
        sent.cancel(true);
      }
    }
  }
}
