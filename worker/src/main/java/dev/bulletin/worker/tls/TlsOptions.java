package dev.bulletin.worker.tls;

import java.nio.file.Files;
import java.nio.file.Path;

/**
 * TLS of the runtime's two listening ports (the gRPC API and the data port): how the runtime
 * serves them, or how a worker node dials them. Immutable, validated on construction; errors
 * name the field and its flag.
 *
 * @param enabled whether both ports speak TLS
 * @param certificate the runtime's PEM certificate chain (server side; null on a client)
 * @param privateKey its PEM private key (server side; null on a client)
 * @param ca PEM CA certificate(s). A client trusts these when it checks the runtime's
 *     certificate; the runtime only records the path in runtime.json for the clients on its
 *     host. Null: the JDK's default trust store (a certificate from a public CA)
 */
public record TlsOptions(boolean enabled, Path certificate, Path privateKey, Path ca) {

  public TlsOptions {
    if (!enabled && (certificate != null || privateKey != null || ca != null)) {
      throw new IllegalArgumentException("TLS is off, yet a certificate, key or CA was given"
          + " (--tls-cert, --tls-key, --tls-ca need --tls)");
    }
    if ((certificate == null) != (privateKey == null)) {
      throw new IllegalArgumentException("certificate (--tls-cert) and privateKey (--tls-key)"
          + " go together: give both or neither");
    }
    readable(certificate, "certificate (--tls-cert)");
    readable(privateKey, "privateKey (--tls-key)");
    readable(ca, "ca (--tls-ca)");
  }

  /** No TLS: plaintext ports (a cluster on loopback). */
  public static TlsOptions plain() {
    return new TlsOptions(false, null, null, null);
  }

  /** The runtime's side: it presents {@code certificate}; {@code ca} may be null. */
  public static TlsOptions server(Path certificate, Path privateKey, Path ca) {
    if (certificate == null) {
      throw new IllegalArgumentException("a TLS server needs a certificate (--tls-cert) and"
          + " its key (--tls-key)");
    }
    return new TlsOptions(true, certificate, privateKey, ca);
  }

  /** A client's side: trusts {@code ca} (null: the JDK's default trust store). */
  public static TlsOptions client(Path ca) {
    return new TlsOptions(true, null, null, ca);
  }

  /** Whether this side presents a certificate (the runtime) rather than checks one. */
  public boolean serves() {
    return certificate != null;
  }

  private static void readable(Path file, String field) {
    if (file != null && !Files.isReadable(file)) {
      throw new IllegalArgumentException(field + ": cannot read " + file
          + (Files.exists(file) ? " (permissions)" : " (no such file)"));
    }
  }
}
