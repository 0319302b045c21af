package dev.bulletin.worker.tls;

import java.security.cert.CertPathValidator;
import java.security.cert.CertPathValidatorException;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.cert.PKIXParameters;
import java.security.cert.TrustAnchor;
import java.security.cert.X509Certificate;
import java.security.GeneralSecurityException;
import java.time.Instant;
import java.util.Date;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.function.Predicate;

/**
 * Who is at the other end of a mutually authenticated TLS link: the one check of a worker
 * certificate, for the runtime at attach and for a reader of a worker's data port. The chain
 * must lead to the cluster CA and be valid now; the certificate must name exactly one worker,
 * the one the peer says it is (a certificate for A attaching as B is refused); and that worker
 * must not be revoked. Checked here again even where the TLS library already checked the chain,
 * because a server that asks for, rather than requires, a certificate lets a link without one
 * through, and only the id binds the certificate to the worker.
 */
public final class WorkerPeers {
  private WorkerPeers() {}

  /** A check's outcome. */
  public sealed interface Verdict {
    /** The peer is this worker. */
    record Worker(String workerId, X509Certificate certificate) implements Verdict {}

    /** Not a worker the cluster accepts, and why (for the log and the refusal's message). */
    record Refused(String reason) implements Verdict {}
  }

  /**
   * Checks {@code chain} (the peer's, leaf first) against {@code ca} at {@code now}, for the
   * worker {@code claimedId} (null: whichever worker it names), none of {@code revoked}.
   */
  public static Verdict check(List<? extends Certificate> chain, X509Certificate ca,
      String claimedId, Predicate<String> revoked, Instant now) {
    if (chain == null || chain.isEmpty() || !(chain.get(0) instanceof X509Certificate leaf)) {
      return new Verdict.Refused("no client certificate: a worker attaches with the certificate"
          + " it got at join (bulletin worker --join TOKEN)");
    }
    try {
      PKIXParameters params = new PKIXParameters(Set.of(new TrustAnchor(ca, null)));
      params.setRevocationEnabled(false); // revocation is by worker id, below
      params.setDate(Date.from(now));
      CertPathValidator.getInstance("PKIX").validate(
          CertificateFactory.getInstance("X.509").generateCertPath(List.copyOf(chain)), params);
    } catch (CertPathValidatorException e) {
      return new Verdict.Refused("the certificate is not one the cluster CA issued or is no"
          + " longer valid (" + e.getMessage() + "): join again with a new token");
    } catch (GeneralSecurityException e) {
      return new Verdict.Refused("unreadable certificate: " + e.getMessage());
    }
    Optional<String> named = WorkerCertificates.workerId(leaf);
    if (named.isEmpty()) {
      return new Verdict.Refused("the certificate names no worker (it is not a worker"
          + " certificate)");
    }
    String id = named.get();
    if (claimedId != null && !claimedId.equals(id)) {
      return new Verdict.Refused("the certificate is worker " + id + "'s, not " + claimedId
          + "'s: a worker attaches under its own id only");
    }
    if (revoked.test(id)) {
      return new Verdict.Refused("worker " + id + " is revoked (bulletin worker revoke); the"
          + " owner must issue it a new join token");
    }
    return new Verdict.Worker(id, leaf);
  }
}
