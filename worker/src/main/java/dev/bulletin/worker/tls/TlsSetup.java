package dev.bulletin.worker.tls;

import dev.bulletin.bridge.dataport.TlsEngines;
import io.vertx.core.Vertx;
import io.vertx.core.http.ClientAuth;
import io.vertx.core.http.HttpClientOptions;
import io.vertx.core.http.HttpServerOptions;
import io.vertx.core.http.HttpVersion;
import io.vertx.core.net.PemKeyCertOptions;
import io.vertx.core.net.PemTrustOptions;
import javax.net.ssl.TrustManager;

/**
 * Turns {@link TlsOptions} into what the two ports need: Vert.x options for the gRPC API
 * (HTTP/2 over TLS, chosen by ALPN) and the engines of the data port's {@code TlsChannel}
 * ({@link DataTls}), both on the library {@link TlsEngine} chose. Both read the same PEM files through Vert.x's PEM loaders, so a key or
 * certificate that one port accepts, the other accepts too.
 */
public final class TlsSetup {
  /** TLS 1.3 only: every bulletin side speaks it, and it needs one round trip less. */
  static final String PROTOCOL = "TLSv1.3";

  private TlsSetup() {}

  /** The gRPC server's HTTP options with TLS switched on when {@code tls} enables it. */
  public static HttpServerOptions serve(HttpServerOptions http, TlsOptions tls) {
    if (!tls.enabled()) {
      return http;
    }
    return http.setSsl(true).setUseAlpn(true).setSslEngineOptions(TlsEngine.vertx())
        .setKeyCertOptions(keyCert(tls))
        .removeEnabledSecureTransportProtocol("TLSv1.2");
  }

  /**
   * The runtime's gRPC server options: {@link #serve} and, with a CA, a request (not a
   * requirement: clients have no certificate) for the peer's certificate, checked against that
   * CA; a worker's is then read by {@link WorkerPeers}. Only the gRPC API asks: the dashboard
   * does not, so a browser is never offered a certificate picker.
   */
  public static HttpServerOptions serveAskingWorkers(HttpServerOptions http, TlsOptions tls) {
    serve(http, tls);
    if (tls.enabled() && tls.ca() != null) {
      http.setClientAuth(ClientAuth.REQUEST)
          .setTrustOptions(new PemTrustOptions().addCertPath(tls.ca().toString()));
    }
    return http;
  }

  /**
   * HTTP options for a gRPC client of the runtime: HTTP/2 with prior knowledge in plaintext;
   * with TLS, the runtime's certificate checked against the CA and the dialled host name, and
   * this side's own certificate presented where {@code tls} has one (a worker that joined).
   */
  public static HttpClientOptions dial(TlsOptions tls) {
    HttpClientOptions http = new HttpClientOptions().setHttp2ClearTextUpgrade(false)
        .setProtocolVersion(HttpVersion.HTTP_2);
    if (!tls.enabled()) {
      return http;
    }
    http.setSsl(true).setUseAlpn(true).setVerifyHost(true).setSslEngineOptions(TlsEngine.vertx())
        .removeEnabledSecureTransportProtocol("TLSv1.2");
    if (tls.ca() != null) {
      http.setTrustOptions(new PemTrustOptions().addCertPath(tls.ca().toString()));
    }
    if (tls.serves()) { // a worker with its own certificate: mutual TLS
      http.setKeyCertOptions(keyCert(tls));
    }
    return http;
  }

  /** The data port server's engines: they present the runtime's certificate. */
  public static TlsEngines serverEngines(Vertx vertx, TlsOptions tls) throws Exception {
    return DataTls.server(keyCert(tls).getKeyManagerFactory(vertx));
  }

  /** A data port client's engines: they trust the CA (or the JDK's default trust store). */
  public static TlsEngines clientEngines(Vertx vertx, TlsOptions tls) throws Exception {
    TrustManager trust = tls.ca() == null ? null : new PemTrustOptions()
        .addCertPath(tls.ca().toString()).getTrustManagerFactory(vertx).getTrustManagers()[0];
    return DataTls.client(trust);
  }

  private static PemKeyCertOptions keyCert(TlsOptions tls) {
    if (!tls.serves()) {
      throw new IllegalArgumentException("serving TLS needs a certificate and key (--tls-cert,"
          + " --tls-key)");
    }
    return new PemKeyCertOptions().setCertPath(tls.certificate().toString())
        .setKeyPath(tls.privateKey().toString());
  }
}
