package dev.bulletin.worker.tls;

import io.vertx.core.Vertx;
import io.vertx.core.net.PemKeyCertOptions;
import java.net.Socket;
import java.nio.file.Path;
import java.security.Principal;
import java.security.PrivateKey;
import java.security.cert.X509Certificate;
import javax.net.ssl.KeyManager;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.X509ExtendedKeyManager;
import javax.net.ssl.X509KeyManager;

/**
 * The key and certificate a worker's data port presents, read again from their PEM files when
 * the worker renewed its certificate: each handshake asks for the current one, so a renewal
 * takes effect on the next connection without restarting the port.
 */
public final class RenewableKeys extends X509ExtendedKeyManager {
  private final Vertx vertx;
  private final Path certificate;
  private final Path privateKey;
  private volatile X509KeyManager current;

  public RenewableKeys(Vertx vertx, Path certificate, Path privateKey) throws Exception {
    this.vertx = vertx;
    this.certificate = certificate;
    this.privateKey = privateKey;
    reload();
  }

  /** Reads the files again (after a renewal wrote them). */
  public void reload() throws Exception {
    for (KeyManager manager : new PemKeyCertOptions().setCertPath(certificate.toString())
        .setKeyPath(privateKey.toString()).getKeyManagerFactory(vertx).getKeyManagers()) {
      if (manager instanceof X509KeyManager x509) {
        current = x509;
        return;
      }
    }
    throw new IllegalStateException("no X.509 key in " + certificate + " and " + privateKey);
  }

  @Override
  public String chooseEngineServerAlias(String keyType, Principal[] issuers, SSLEngine engine) {
    return current.chooseServerAlias(keyType, issuers, null);
  }

  @Override
  public String chooseEngineClientAlias(String[] keyType, Principal[] issuers, SSLEngine engine) {
    return null; // a data port's server side only
  }

  @Override
  public String[] getClientAliases(String keyType, Principal[] issuers) {
    return null;
  }

  @Override
  public String chooseClientAlias(String[] keyType, Principal[] issuers, Socket socket) {
    return null;
  }

  @Override
  public String[] getServerAliases(String keyType, Principal[] issuers) {
    return current.getServerAliases(keyType, issuers);
  }

  @Override
  public String chooseServerAlias(String keyType, Principal[] issuers, Socket socket) {
    return current.chooseServerAlias(keyType, issuers, socket);
  }

  @Override
  public X509Certificate[] getCertificateChain(String alias) {
    return current.getCertificateChain(alias);
  }

  @Override
  public PrivateKey getPrivateKey(String alias) {
    return current.getPrivateKey(alias);
  }
}
