package dev.bulletin.runtime.identity.impl;

import dev.bulletin.runtime.identity.JoinTokens;
import dev.bulletin.runtime.identity.WorkerIdentities;
import dev.bulletin.runtime.identity.WorkerRoster;
import dev.bulletin.worker.tls.WorkerCa;
import dev.bulletin.worker.tls.WorkerCertificates;
import dev.bulletin.worker.tls.WorkerPeers;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.security.cert.Certificate;
import java.security.cert.X509Certificate;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/** {@link WorkerIdentities} over the cluster CA, the join tokens and the roster file. */
public final class CaWorkerIdentities implements WorkerIdentities {
  private final JoinTokens tokens;
  private final WorkerCa ca;
  private final WorkerRoster roster;
  private final Clock clock;
  /** The newest certificate, by worker, of those this runtime issued since it started. */
  private final Map<String, X509Certificate> newest = new ConcurrentHashMap<>();

  public CaWorkerIdentities(JoinTokens tokens, WorkerCa ca, WorkerRoster roster, Clock clock) {
    this.tokens = tokens;
    this.ca = ca;
    this.roster = roster;
    this.clock = clock;
  }

  @Override
  public X509Certificate ca() {
    return ca.certificate();
  }

  @Override
  public String issueJoinToken(String workerId, Duration ttl) throws IOException {
    if (workerId != null && roster.revoked(workerId)) {
      throw new IllegalArgumentException("worker " + workerId + " is revoked: a revoked id"
          + " stays revoked; give the worker a new --worker-id");
    }
    String token = tokens.issue(workerId, ttl); // checks the id is there and the lifetime
    roster.issued(workerId);
    return token;
  }

  @Override
  public Granted join(String token, String csrPem) {
    JoinTokens.Redeemed redeemed = tokens.redeem(token);
    if (redeemed instanceof JoinTokens.Redeemed.Refused refused) {
      return new Granted.Refused(refused.reason());
    }
    return sign(((JoinTokens.Redeemed.Worker) redeemed).workerId(), csrPem);
  }

  @Override
  public Granted renew(List<? extends Certificate> peerChain, String csrPem) {
    WorkerPeers.Verdict verdict = peer(peerChain, null);
    if (verdict instanceof WorkerPeers.Verdict.Refused refused) {
      return new Granted.Refused(refused.reason());
    }
    return sign(((WorkerPeers.Verdict.Worker) verdict).workerId(), csrPem);
  }

  private Granted sign(String workerId, String csrPem) {
    if (roster.revoked(workerId)) {
      return new Granted.Refused("worker " + workerId + " is revoked (bulletin worker revoke)");
    }
    WorkerCa.Issued issued = ca.sign(workerId, csrPem);
    if (issued instanceof WorkerCa.Issued.Refused refused) {
      return new Granted.Refused(refused.reason());
    }
    WorkerCa.Issued.Certificate cert = (WorkerCa.Issued.Certificate) issued;
    try {
      roster.issued(workerId);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot record worker " + workerId + " in the roster", e);
    }
    newest.merge(workerId, cert.certificate(),
        (a, b) -> a.getNotAfter().after(b.getNotAfter()) ? a : b);
    return new Granted.Certificate(workerId, cert.certificate(), cert.pem());
  }

  @Override
  public WorkerPeers.Verdict peer(List<? extends Certificate> chain, String claimedId) {
    Instant now = clock.instant();
    Instant at = now;
    if (chain != null && !chain.isEmpty() && chain.get(0) instanceof X509Certificate leaf) {
      Instant end = leaf.getNotAfter().toInstant();
      X509Certificate renewed = WorkerCertificates.workerId(leaf).map(newest::get)
          .orElse(null);
      // Only for the same key: the worker keeps its key across renewals, so an older
      // certificate of another key (a copy taken before a re-join) gains nothing here.
      if (end.isBefore(now) && renewed != null && renewed.getNotAfter().toInstant().isAfter(now)
          && renewed.getPublicKey().equals(leaf.getPublicKey())) {
        at = end.minusSeconds(1); // the chain is checked as of its last valid moment
      }
    }
    return WorkerPeers.check(chain, ca.certificate(), claimedId, roster::revoked, at);
  }

  @Override
  public boolean known(String workerId) {
    return roster.known(workerId);
  }

  @Override
  public void revoke(String workerId) throws IOException {
    roster.revoke(workerId);
    newest.remove(workerId);
  }
}
