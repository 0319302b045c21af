package dev.bulletin.worker.tls;

import dev.bulletin.bridge.dataport.TlsEngines;
import io.netty.buffer.ByteBufAllocator;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslContextBuilder;
import io.netty.handler.ssl.SslProvider;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLException;
import javax.net.ssl.TrustManager;

/**
 * The data ports' TLS engines, from the library {@link TlsEngine} chose for this JVM. Both
 * libraries speak TLS 1.3 only and take the same keys and trust managers, so a peer cannot tell
 * which one a side runs.
 */
public final class DataTls {

  private DataTls() {}

  /** Engines that present the key and certificate {@code keys} hold, asking for none back. */
  public static TlsEngines server(KeyManagerFactory keys) {
    return server(keys, TlsEngine.provider());
  }

  /** Engines that present what {@code keys} holds at each handshake (a renewable key). */
  public static TlsEngines server(javax.net.ssl.KeyManager keys) {
    return engines(SslContextBuilder.forServer(keys), TlsEngine.provider());
  }

  static TlsEngines server(KeyManagerFactory keys, SslProvider provider) {
    return engines(SslContextBuilder.forServer(keys), provider);
  }

  /**
   * Engines that check the server with {@code trust} (null: the JDK's default trust store);
   * {@code TlsChannel.client} asks for the dialled host name to be checked.
   */
  public static TlsEngines client(TrustManager trust) {
    return client(trust, TlsEngine.provider());
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
      throw new IllegalStateException("cannot set up TLS for the data port (" + provider
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
}
