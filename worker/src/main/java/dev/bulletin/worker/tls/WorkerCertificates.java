package dev.bulletin.worker.tls;

import java.security.cert.CertificateParsingException;
import java.security.cert.X509Certificate;
import java.util.Collection;
import java.util.List;
import java.util.Optional;

/**
 * How a worker's id sits in its certificate, for the CA that writes it and every side that
 * reads it (the runtime at attach, a reader of the worker's data port): a URI subject
 * alternative name {@code urn:bulletin:worker:<id>}. A URI, not a DNS name, because a worker id
 * is not a host name, and a name no public CA would issue.
 */
public final class WorkerCertificates {
  /** The prefix of the worker id's URI name. */
  public static final String URI_PREFIX = "urn:bulletin:worker:";
  private static final int URI_NAME = 6;

  private WorkerCertificates() {}

  /** The URI a certificate for {@code workerId} carries. */
  public static String uri(String workerId) {
    return URI_PREFIX + workerId;
  }

  /**
   * The worker id {@code certificate} names: its one bulletin worker URI; empty when it has
   * none or several (a certificate naming two workers is nobody's).
   */
  public static Optional<String> workerId(X509Certificate certificate) {
    Collection<List<?>> names;
    try {
      names = certificate.getSubjectAlternativeNames();
    } catch (CertificateParsingException e) {
      return Optional.empty();
    }
    if (names == null) {
      return Optional.empty();
    }
    List<String> ids = names.stream()
        .filter(name -> ((Integer) name.get(0)) == URI_NAME)
        .map(name -> (String) name.get(1))
        .filter(uri -> uri.startsWith(URI_PREFIX))
        .map(uri -> uri.substring(URI_PREFIX.length()))
        .toList();
    return ids.size() == 1 && !ids.get(0).isEmpty() ? Optional.of(ids.get(0)) : Optional.empty();
  }
}
