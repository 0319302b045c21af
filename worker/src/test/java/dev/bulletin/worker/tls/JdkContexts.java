package dev.bulletin.worker.tls;

import java.security.KeyStore;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;

/** JDK TLS contexts for a port identity: the peers tests and benchmarks play with SSL sockets. */
public final class JdkContexts {
  private JdkContexts() {}

  /** Presents the identity's certificate. */
  public static SSLContext serving(PortIdentity identity) throws Exception {
    SSLContext context = SSLContext.getInstance(TlsSetup.PROTOCOL);
    context.init(identity.keyManagers().getKeyManagers(), null, null);
    return context;
  }

  /** Trusts the identity's certificate and nothing else (no host name check: an SSLSocket's). */
  public static SSLContext trusting(PortIdentity identity) throws Exception {
    KeyStore anchors = KeyStore.getInstance("PKCS12");
    anchors.load(null, null);
    anchors.setCertificateEntry("port", identity.certificate());
    TrustManagerFactory trust = TrustManagerFactory.getInstance(
        TrustManagerFactory.getDefaultAlgorithm());
    trust.init(anchors);
    SSLContext context = SSLContext.getInstance(TlsSetup.PROTOCOL);
    context.init(null, trust.getTrustManagers(), null);
    return context;
  }
}
