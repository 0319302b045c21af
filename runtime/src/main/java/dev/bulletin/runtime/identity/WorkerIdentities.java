package dev.bulletin.runtime.identity;

import dev.bulletin.runtime.identity.impl.CaWorkerIdentities;
import dev.bulletin.worker.tls.WorkerCa;
import dev.bulletin.worker.tls.WorkerPeers;
import java.io.IOException;
import java.security.cert.Certificate;
import java.security.cert.X509Certificate;
import java.time.Clock;
import java.time.Duration;
import java.util.List;

/**
 * Each worker its own identity: join tokens the owner issues, the certificates the cluster CA
 * signs for them (at join and at renewal), the check of a worker's certificate on every
 * request, and revocation. One place, so the runtime's every entry point (attach, objects,
 * renewal) applies the same rules.
 */
public interface WorkerIdentities {
  static WorkerIdentities of(JoinTokens tokens, WorkerCa ca, WorkerRoster roster, Clock clock) {
    return new CaWorkerIdentities(tokens, ca, roster, clock);
  }

  /** The cluster CA's certificate. */
  X509Certificate ca();

  /** A join token for {@code workerId}; refused (IllegalArgumentException) for a revoked one. */
  String issueJoinToken(String workerId, Duration ttl) throws IOException;

  /** Spends {@code token} and signs {@code csrPem} for the worker it names. */
  Granted join(String token, String csrPem);

  /** Signs {@code csrPem} for the worker the peer's current certificate names. */
  Granted renew(List<? extends Certificate> peerChain, String csrPem);

  /**
   * Who the peer presenting {@code chain} is ({@code claimedId}: the id it must name; null:
   * any). A certificate that expired counts while the worker holds a newer one this runtime
   * issued (a connection keeps the certificate of its handshake; the worker renewed over it).
   */
  WorkerPeers.Verdict peer(List<? extends Certificate> chain, String claimedId);

  /** Whether this CA issued {@code workerId} a token or certificate, or revoked it. */
  boolean known(String workerId);

  /** Revokes {@code workerId}: from now on, and after restarts, nothing of it is accepted. */
  void revoke(String workerId) throws IOException;

  /** A signing's outcome: the worker and its certificate, or why not. */
  sealed interface Granted {
    record Certificate(String workerId, X509Certificate certificate, String pem)
        implements Granted {}

    record Refused(String reason) implements Granted {}
  }
}
