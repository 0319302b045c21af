package dev.bulletin.runtime.workers;

import dev.bulletin.protocol.IssueJoinTokenReply;
import dev.bulletin.protocol.IssueJoinTokenRequest;
import dev.bulletin.protocol.JoinRequest;
import dev.bulletin.protocol.RevokeWorkerReply;
import dev.bulletin.protocol.RevokeWorkerRequest;
import dev.bulletin.protocol.WorkerCertificate;
import dev.bulletin.runtime.api.Authenticator;
import dev.bulletin.runtime.identity.Identity;
import dev.bulletin.runtime.identity.JoinTokens;
import dev.bulletin.runtime.identity.WorkerIdentities;
import dev.bulletin.worker.tls.impl.BcWorkerCa;
import io.vertx.core.Vertx;
import io.vertx.grpc.common.GrpcStatus;
import io.vertx.grpc.common.ServiceName;
import io.vertx.grpc.server.GrpcServer;
import io.vertx.grpc.server.GrpcServerRequest;
import java.io.IOException;
import java.time.Duration;
import java.util.concurrent.Callable;
import java.util.logging.Logger;

/**
 * Worker certificates on the wire (docs/security.md, "A certificate per worker"): the owner's
 * join tokens and revocations ({@code Bulletin.IssueJoinToken}, {@code RevokeWorker}), a
 * worker's join with a token and its renewal over its mutual TLS link ({@code Workers.Join},
 * {@code Renew}). Mounted only where the runtime holds the cluster CA's key. Signing and the
 * roster's file writes run off the event loop.
 */
public final class WorkerIdentityApi {
  private static final Logger LOG = Logger.getLogger(WorkerIdentityApi.class.getName());
  private static final ServiceName WORKERS = ServiceName.create("bulletin.v1.Workers");
  private static final ServiceName BULLETIN = ServiceName.create("bulletin.v1.Bulletin");
  private static final String BEARER = "Bearer ";

  private final Vertx vertx;
  private final WorkerIdentities identities;
  private final WorkerAttachApi attached;

  public WorkerIdentityApi(Vertx vertx, WorkerIdentities identities, WorkerAttachApi attached) {
    this.vertx = vertx;
    this.identities = identities;
    this.attached = attached;
  }

  public void mount(GrpcServer server, Authenticator auth) {
    // Join has no bearer identity: the join token in its place is the credential.
    server.callHandler(Authenticator.method(WORKERS, "Join", JoinRequest.newBuilder()),
        this::join);
    // Renew is a certified worker's only: the certificate it presents names whom to renew.
    server.callHandler(Authenticator.method(WORKERS, "Renew", JoinRequest.newBuilder()),
        auth.workers(this::renew));
    server.callHandler(Authenticator.method(BULLETIN, "IssueJoinToken",
        IssueJoinTokenRequest.newBuilder()), auth.users(this::issue));
    server.callHandler(Authenticator.method(BULLETIN, "RevokeWorker",
        RevokeWorkerRequest.newBuilder()), auth.users(this::revoke));
  }

  private void join(GrpcServerRequest<JoinRequest, WorkerCertificate> request) {
    String header = request.headers().get("authorization");
    String token = header != null && header.startsWith(BEARER)
        ? header.substring(BEARER.length()).strip() : "";
    request.handler(join -> answer(request, () -> identities.join(token, join.getCsrPem()),
        "joined"));
  }

  private void renew(Identity identity,
      GrpcServerRequest<JoinRequest, WorkerCertificate> request) {
    if (identity.certifiedWorkerId().isEmpty()) {
      request.response().status(GrpcStatus.PERMISSION_DENIED).statusMessage("only a worker"
          + " presenting its certificate renews it").end();
      return;
    }
    var chain = Authenticator.peerChain(request.connection());
    request.handler(renew -> answer(request, () -> identities.renew(chain, renew.getCsrPem()),
        "renewed its certificate"));
  }

  private void answer(GrpcServerRequest<JoinRequest, WorkerCertificate> request,
      Callable<WorkerIdentities.Granted> signing, String what) {
    vertx.executeBlocking(signing).onComplete(done -> {
      if (done.failed()) {
        request.response().status(GrpcStatus.INTERNAL).statusMessage(
            String.valueOf(done.cause().getMessage())).end();
        return;
      }
      if (done.result() instanceof WorkerIdentities.Granted.Refused refused) {
        request.response().status(GrpcStatus.PERMISSION_DENIED).statusMessage(refused.reason())
            .end();
        return;
      }
      var granted = (WorkerIdentities.Granted.Certificate) done.result();
      attached.renewed(granted.workerId(), granted.certificate().getNotAfter().toInstant());
      String caPem;
      try {
        caPem = BcWorkerCa.pem(identities.ca());
      } catch (IOException e) {
        request.response().status(GrpcStatus.INTERNAL).statusMessage(e.getMessage()).end();
        return;
      }
      LOG.info(() -> "worker " + granted.workerId() + " " + what + ", good until "
          + granted.certificate().getNotAfter().toInstant());
      request.response().end(WorkerCertificate.newBuilder().setWorkerId(granted.workerId())
          .setCertificatePem(granted.pem()).setCaPem(caPem)
          .setNotAfter(granted.certificate().getNotAfter().getTime() / 1000.0).build());
    });
  }

  private void issue(Identity identity,
      GrpcServerRequest<IssueJoinTokenRequest, IssueJoinTokenReply> request) {
    request.handler(issue -> {
      if (!identity.owner()) {
        request.response().status(GrpcStatus.PERMISSION_DENIED).statusMessage("only the"
            + " cluster's owner issues join tokens; you are " + identity.user()).end();
        return;
      }
      double seconds = issue.getTtlSeconds();
      if (!(seconds >= 0) || Double.isInfinite(seconds)) {
        request.response().status(GrpcStatus.INVALID_ARGUMENT).statusMessage("ttl_seconds must"
            + " be >= 0 (0: the default " + JoinTokens.DEFAULT_TTL.toMinutes() + " minutes)")
            .end();
        return;
      }
      Duration ttl = seconds == 0 ? JoinTokens.DEFAULT_TTL
          : Duration.ofMillis(Math.max(1, Math.round(seconds * 1000)));
      vertx.executeBlocking(() -> identities.issueJoinToken(issue.getWorkerId(), ttl))
          .onComplete(done -> {
            if (done.failed()) {
              request.response().status(done.cause() instanceof IllegalArgumentException
                  ? GrpcStatus.INVALID_ARGUMENT : GrpcStatus.INTERNAL)
                  .statusMessage(String.valueOf(done.cause().getMessage())).end();
              return;
            }
            LOG.info(() -> identity.user() + " issued a join token for worker "
                + issue.getWorkerId() + ", good for " + ttl.toSeconds() + " s");
            request.response().end(IssueJoinTokenReply.newBuilder().setToken(done.result())
                .setExpiresAt(System.currentTimeMillis() / 1000.0 + ttl.toMillis() / 1000.0)
                .build());
          });
    });
  }

  private void revoke(Identity identity,
      GrpcServerRequest<RevokeWorkerRequest, RevokeWorkerReply> request) {
    request.handler(revoke -> {
      String id = revoke.getWorkerId();
      if (!identity.owner()) {
        request.response().status(GrpcStatus.PERMISSION_DENIED).statusMessage("only the"
            + " cluster's owner revokes workers; you are " + identity.user()).end();
        return;
      }
      if (!identities.known(id) && !attached.isAttached(id)) {
        request.response().status(GrpcStatus.NOT_FOUND).statusMessage("no worker '" + id
            + "' was ever issued a certificate by this cluster (bulletin status lists the"
            + " attached workers)").end();
        return;
      }
      vertx.<Void>executeBlocking(() -> {
        identities.revoke(id);
        return null;
      }).onComplete(done -> {
        if (done.failed()) {
          request.response().status(done.cause() instanceof IllegalArgumentException
              ? GrpcStatus.INVALID_ARGUMENT : GrpcStatus.INTERNAL)
              .statusMessage(String.valueOf(done.cause().getMessage())).end();
          return;
        }
        // Written first, then the link closed: a reattach finds the revocation in force.
        boolean was = attached.revoked(id);
        LOG.info(() -> identity.user() + " revoked worker " + id
            + (was ? "; its link is closed" : ""));
        request.response().end(RevokeWorkerReply.newBuilder().setWasAttached(was).build());
      });
    });
  }
}
