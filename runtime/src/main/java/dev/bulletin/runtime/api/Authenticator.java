package dev.bulletin.runtime.api;

import dev.bulletin.runtime.identity.Identity;
import dev.bulletin.runtime.identity.TokenRegistry;
import dev.bulletin.runtime.identity.WorkerIdentities;
import dev.bulletin.worker.ProtoCodec;
import dev.bulletin.worker.tls.WorkerPeers;
import io.vertx.core.Handler;
import io.vertx.core.http.HttpConnection;
import java.security.cert.Certificate;
import java.util.List;
import javax.net.ssl.SSLPeerUnverifiedException;
import io.vertx.grpc.common.GrpcStatus;
import io.vertx.grpc.common.ServiceMethod;
import io.vertx.grpc.common.ServiceName;
import io.vertx.grpc.server.GrpcServerRequest;

/** Turns the {@code authorization} header of every RPC into an {@link Identity}, or refuses it. */
public final class Authenticator {

  public interface AuthenticatedHandler<Req, Resp> {
    void handle(Identity identity, GrpcServerRequest<Req, Resp> request);
  }

  /** What a worker attaching with the shared token is told in a cluster of worker certificates. */
  public static final String USE_A_CERTIFICATE = "this cluster gives each worker a certificate of"
      + " its own, and the shared worker token no longer admits workers: on the head, get a join"
      + " token (bulletin worker join-token WORKER_ID) and start the worker with it (bulletin"
      + " worker --join TOKEN, or BULLETIN_JOIN_TOKEN in its environment)";

  private final TokenRegistry tokens;
  /** Null: workers present the shared worker token; else each its own certificate. */
  private final WorkerIdentities workerCertificates;

  public Authenticator(TokenRegistry tokens) {
    this(tokens, null);
  }

  public Authenticator(TokenRegistry tokens, WorkerIdentities workerCertificates) {
    this.tokens = tokens;
    this.workerCertificates = workerCertificates;
  }

  public <Req, Resp> Handler<GrpcServerRequest<Req, Resp>> users(AuthenticatedHandler<Req, Resp> handler) {
    return any((identity, request) -> {
      if (identity.worker()) {
        request.response().status(GrpcStatus.PERMISSION_DENIED).statusMessage("the worker token"
            + " only attaches workers and moves objects; use a user's token for this").end();
        return;
      }
      handler.handle(identity, request);
    });
  }

  public <Req, Resp> Handler<GrpcServerRequest<Req, Resp>> workers(AuthenticatedHandler<Req, Resp> handler) {
    return any((identity, request) -> {
      if (!identity.worker()) {
        request.response().status(GrpcStatus.PERMISSION_DENIED).statusMessage("only worker"
            + " agents attach, with the cluster's worker token (BULLETIN_WORKER_TOKEN, written by"
            + " `bulletin up` to ~/.bulletin/worker-token)").end();
        return;
      }
      handler.handle(identity, request);
    });
  }

  /** Users and workers alike (objects move both ways). */
  public <Req, Resp> Handler<GrpcServerRequest<Req, Resp>> any(AuthenticatedHandler<Req, Resp> handler) {
    return request -> {
      var identity = tokens.authenticate(request.headers().get("authorization"));
      if (workerCertificates != null) {
        if (identity.isPresent() && identity.get().worker()) {
          request.response().status(GrpcStatus.PERMISSION_DENIED)
              .statusMessage(USE_A_CERTIFICATE).end();
          return;
        }
        if (identity.isEmpty()) {
          List<Certificate> chain = peerChain(request.connection());
          if (!chain.isEmpty()) {
            WorkerPeers.Verdict verdict = workerCertificates.peer(chain, null);
            if (verdict instanceof WorkerPeers.Verdict.Refused refused) {
              request.response().status(GrpcStatus.UNAUTHENTICATED)
                  .statusMessage(refused.reason()).end();
              return;
            }
            identity = java.util.Optional.of(Identity.certifiedWorker(
                ((WorkerPeers.Verdict.Worker) verdict).workerId()));
          }
        }
      }
      if (identity.isEmpty()) {
        request.response().status(GrpcStatus.UNAUTHENTICATED).statusMessage("the token is not"
            + " known to this cluster: use the token `bulletin up` wrote (~/.bulletin/token) or the"
            + " one your administrator gave you (BULLETIN_TOKEN); workers use the cluster's worker"
            + " token (BULLETIN_WORKER_TOKEN)").end();
        return;
      }
      handler.handle(identity.get(), request);
    };
  }

  /** The certificates the peer of {@code connection} presented; empty when none (or no TLS). */
  public static List<Certificate> peerChain(HttpConnection connection) {
    if (connection == null || !connection.isSsl()) {
      return List.of();
    }
    try {
      List<Certificate> chain = connection.peerCertificates();
      return chain == null ? List.of() : chain;
    } catch (SSLPeerUnverifiedException none) {
      return List.of();
    }
  }

  public static <Req, Resp extends com.google.protobuf.MessageLite> ServiceMethod<Req, Resp> method(
      ServiceName service, String name, com.google.protobuf.Message.Builder requestType) {
    return ServiceMethod.server(service, name, ProtoCodec.encoder(),
        ProtoCodec.decoder(requestType));
  }
}
