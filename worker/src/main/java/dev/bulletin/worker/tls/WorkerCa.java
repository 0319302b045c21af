package dev.bulletin.worker.tls;

import dev.bulletin.worker.tls.impl.BcWorkerCa;
import java.io.IOException;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.cert.X509Certificate;
import java.time.Duration;

/**
 * The cluster CA's one job in the runtime: turning a worker's certificate signing request into
 * a short-lived certificate that names that worker. The runtime calls it only after a join
 * token (or the worker's current certificate, for a renewal) has said which worker is asking;
 * the name comes from that, never from the request, so a request for someone else's id, for
 * CA rights or for extra names is signed as the worker's own leaf or not at all.
 */
public interface WorkerCa {
  /** The default lifetime of a worker certificate: a stolen one is good for a day at most. */
  Duration DEFAULT_LIFETIME = Duration.ofHours(24);

  /** The CA of {@code bulletin up --tls} (its PEM certificate and PKCS#8 key files). */
  static WorkerCa load(Path certificate, Path privateKey, Duration lifetime)
      throws IOException, GeneralSecurityException {
    return BcWorkerCa.load(certificate, privateKey, lifetime);
  }

  /** The CA's certificate, the trust anchor of every worker certificate. */
  X509Certificate certificate();

  /** Signs {@code csrPem} for {@code workerId}, or says why not. */
  Issued sign(String workerId, String csrPem);

  /** A signing's outcome: a certificate (PEM, the leaf only), or a refusal with its reason. */
  sealed interface Issued {
    /** A certificate for the worker. */
    record Certificate(X509Certificate certificate, String pem) implements Issued {}

    /** Refused: the request was unreadable, unsigned by its key, or its key too weak. */
    record Refused(String reason) implements Issued {}
  }
}
