package dev.bulletin.worker.tls;

import dev.bulletin.bridge.dataport.TlsEngines;
import io.netty.buffer.ByteBufAllocator;
import io.netty.handler.ssl.OpenSsl;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslContextBuilder;
import io.netty.handler.ssl.SslProvider;
import java.util.Locale;
import java.util.logging.Logger;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLException;
import javax.net.ssl.TrustManager;

/**
 * The TLS library of the data ports. Bulk transfers spend their CPU in AES-GCM, and BoringSSL
 * (netty-tcnative, native code for Linux on x86-64 and arm64) runs it at three to five times
 * the JDK 17 engine's rate on the same core, so it is used wherever its native code loads; the
 * JDK's engine elsewhere (another OS, or {@code -Dbulletin.tls.engine=jdk}). Both speak TLS 1.3
 * only and take the same keys and trust managers, so a peer cannot tell which one a side runs.
 * The gRPC API keeps Vert.x's own TLS (small messages: the handshake, not the cipher, is what
 * it pays).
 */
public final class DataTls {
  /** {@code boringssl} (the default where it loads) or {@code jdk}. */
  public static final String ENGINE_PROPERTY = "bulletin.tls.engine";
  private static final Logger LOG = Logger.getLogger(DataTls.class.getName());
  private static final SslProvider PROVIDER = choose();

  private DataTls() {}

  /** The library the data ports' engines come from: {@code boringssl} or {@code jdk}. */
  public static String engine() {
    return PROVIDER == SslProvider.OPENSSL ? "boringssl" : "jdk";
  }

  /** Engines that present the key and certificate {@code keys} hold, asking for none back. */
  public static TlsEngines server(KeyManagerFactory keys) {
    return server(keys, PROVIDER);
  }

  static TlsEngines server(KeyManagerFactory keys, SslProvider provider) {
    return engines(SslContextBuilder.forServer(keys), provider);
  }

  /**
   * Engines that check the server with {@code trust} (null: the JDK's default trust store);
   * {@code TlsChannel.client} asks for the dialled host name to be checked.
   */
  public static TlsEngines client(TrustManager trust) {
    return client(trust, PROVIDER);
  }

  static TlsEngines client(TrustManager trust, SslProvider provider) {
    SslContextBuilder builder = SslContextBuilder.forClient();
    return engines(trust == null ? builder : builder.trustManager(trust), provider);
  }

  private static TlsEngines engines(SslContextBuilder builder, SslProvider provider) {
    SslContext context;
    try {
      context = builder.sslProvider(provider).protocols(TlsSetup.PROTOCOL).build();
    } catch (SSLException e) {
      throw new IllegalStateException("cannot set up TLS for the data port (" + engine()
          + "): " + e.getMessage(), e);
    }
    return new TlsEngines() {
      @Override
      public SSLEngine forServer() {
        return context.newEngine(ByteBufAllocator.DEFAULT);
      }

      @Override
      public SSLEngine forClient(String host, int port) {
        return context.newEngine(ByteBufAllocator.DEFAULT, host, port);
      }
    };
  }

  private static SslProvider choose() {
    String asked = System.getProperty(ENGINE_PROPERTY, "boringssl").trim()
        .toLowerCase(Locale.ROOT);
    switch (asked) {
      case "jdk":
        return SslProvider.JDK;
      case "boringssl":
        if (OpenSsl.isAvailable()) {
          LOG.info("the data ports' TLS runs on " + OpenSsl.versionString()
              + " (netty-tcnative)");
          return SslProvider.OPENSSL;
        }
        LOG.info("BoringSSL's native code did not load here (" + OpenSsl.unavailabilityCause()
            + "); the data ports use the JDK's TLS, at a few times the CPU per byte");
        return SslProvider.JDK;
      default:
        throw new IllegalArgumentException("-D" + ENGINE_PROPERTY + "=" + asked
            + ": expected boringssl or jdk");
    }
  }
}
