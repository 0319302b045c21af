package dev.bulletin.runtime.api;

import dev.bulletin.runtime.identity.Identity;
import dev.bulletin.runtime.identity.TokenRegistry;
import io.vertx.core.Handler;
import io.vertx.grpc.common.GrpcMessageDecoder;
import io.vertx.grpc.common.GrpcMessageEncoder;
import io.vertx.grpc.common.GrpcStatus;
import io.vertx.grpc.common.ServiceMethod;
import io.vertx.grpc.common.ServiceName;
import io.vertx.grpc.server.GrpcServerRequest;

/** Turns the {@code authorization} header of every RPC into an {@link Identity}, or refuses it. */
public final class Authenticator {

  public interface AuthenticatedHandler<Req, Resp> {
    void handle(Identity identity, GrpcServerRequest<Req, Resp> request);
  }

  private final TokenRegistry tokens;

  public Authenticator(TokenRegistry tokens) {
    this.tokens = tokens;
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

  public static <Req, Resp extends com.google.protobuf.MessageLite> ServiceMethod<Req, Resp> method(
      ServiceName service, String name, com.google.protobuf.Message.Builder requestType) {
    return ServiceMethod.server(service, name, GrpcMessageEncoder.encoder(),
        GrpcMessageDecoder.decoder(requestType));
  }
}
