package dev.bulletin.worker.tls;

import io.netty.handler.ssl.OpenSsl;
import io.netty.handler.ssl.SslProvider;
import io.vertx.core.net.JdkSSLEngineOptions;
import io.vertx.core.net.OpenSSLEngineOptions;
import io.vertx.core.net.SSLEngineOptions;
import java.util.Locale;
import java.util.logging.Logger;

/**
 * The one place that decides which TLS library every port of this JVM uses: the gRPC API
 * (Vert.x server and clients, through {@link #vertx()}) and the data ports ({@link DataTls},
 * through {@link #provider()}). Bulk transfers spend their CPU in AES-GCM, and BoringSSL
 * (netty-tcnative, native code for Linux on x86-64) runs it at several times the JDK 17
 * engine's rate on the same core, so it is used wherever its native code loads; the JDK's engine
 * elsewhere (another OS or CPU, or {@code -Dbulletin.tls.engine=jdk}). The choice is made once,
 * at first use, and logged with its reason, so a slow cluster's log says why it is slow.
 */
public final class TlsEngine {
  /** {@code boringssl} (the default where it loads) or {@code jdk}. */
  public static final String PROPERTY = "bulletin.tls.engine";
  private static final Logger LOG = Logger.getLogger(TlsEngine.class.getName());
  private static final SslProvider PROVIDER = choose();

  private TlsEngine() {}

  /** The Netty provider the data ports' engines come from. */
  public static SslProvider provider() {
    return PROVIDER;
  }

  /** {@code boringssl} or {@code jdk}: what this JVM's ports run on. */
  public static String name() {
    return PROVIDER == SslProvider.OPENSSL ? "boringssl" : "jdk";
  }

  /** The same library for Vert.x's servers and clients (a fresh copy: Vert.x options are mutable). */
  public static SSLEngineOptions vertx() {
    return PROVIDER == SslProvider.OPENSSL
        ? new OpenSSLEngineOptions().setSessionCacheEnabled(true)
        : new JdkSSLEngineOptions();
  }

  private static SslProvider choose() {
    String asked = System.getProperty(PROPERTY, "boringssl").trim().toLowerCase(Locale.ROOT);
    switch (asked) {
      case "jdk":
        LOG.info("TLS (gRPC and data ports) runs on the JDK's engine: -D" + PROPERTY + "=jdk");
        return SslProvider.JDK;
      case "boringssl":
        if (OpenSsl.isAvailable()) {
          LOG.info("TLS (gRPC and data ports) runs on " + OpenSsl.versionString()
              + " (netty-tcnative)");
          return SslProvider.OPENSSL;
        }
        LOG.warning("TLS (gRPC and data ports) runs on the JDK's engine, at a few times the CPU"
            + " per byte: BoringSSL's native code did not load here ("
            + OpenSsl.unavailabilityCause() + "); it ships for Linux on x86-64 only");
        return SslProvider.JDK;
      default:
        throw new IllegalArgumentException("-D" + PROPERTY + "=" + asked
            + ": expected boringssl or jdk");
    }
  }
}
