package dev.bulletin.runtime.impl;

import com.google.protobuf.ByteString;
import dev.bulletin.bridge.ObjectId;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.bridge.ObjectStoreException;
import dev.bulletin.protocol.ClientMessage;
import dev.bulletin.protocol.ClusterStatus;
import dev.bulletin.protocol.GetObjectRequest;
import dev.bulletin.protocol.HelloReply;
import dev.bulletin.protocol.HelloRequest;
import dev.bulletin.protocol.ObjectChunk;
import dev.bulletin.protocol.PutObjectReply;
import dev.bulletin.protocol.ServerMessage;
import dev.bulletin.protocol.ShutdownReply;
import dev.bulletin.protocol.ShutdownRequest;
import dev.bulletin.protocol.StatusRequest;
import dev.bulletin.protocol.SubmitReply;
import dev.bulletin.protocol.SubmitRequest;
import dev.bulletin.runtime.identity.Identity;
import io.vertx.grpc.common.GrpcStatus;
import io.vertx.grpc.common.ServiceMethod;
import io.vertx.grpc.common.ServiceName;
import io.vertx.grpc.server.GrpcServer;
import io.vertx.grpc.server.GrpcServerRequest;
import java.nio.ByteBuffer;
import java.util.HashMap;
import java.util.Map;

/**
 * The client-facing gRPC service ({@code bulletin.v1.Bulletin}): authenticates each call and
 * turns messages into control-plane operations. Handlers run on the control plane's event loop.
 */
final class GrpcApi {

  private static final ServiceName SERVICE = ServiceName.create("bulletin.v1.Bulletin");
  static final int CHUNK_BYTES = 1 << 20;

  private final ControlPlane plane;
  /** Open sessions by id, for Submit; a session leaves when its stream ends. */
  private final Map<String, ClientSession> sessions = new HashMap<>();
  private final StatusReport status;
  private final String clusterId;
  private final String version;
  private final long inlineLimit;
  private final long maxMessage;
  private final Runnable shutdown;

  GrpcApi(ControlPlane plane, StatusReport status, String clusterId,
      String version, long inlineLimit, long maxMessage, Runnable shutdown) {
    this.plane = plane;
    this.status = status;
    this.clusterId = clusterId;
    this.version = version;
    this.inlineLimit = inlineLimit;
    this.maxMessage = maxMessage;
    this.shutdown = shutdown;
  }

  void mount(GrpcServer server, Authenticator auth) {
    server.callHandler(method("Hello", HelloRequest.newBuilder()), auth.any(this::hello));
    server.callHandler(method("Session", ClientMessage.newBuilder()), auth.users(this::session));
    server.callHandler(method("Submit", SubmitRequest.newBuilder()), auth.users(this::submit));
    server.callHandler(method("PutObject", ObjectChunk.newBuilder()), auth.any(this::putObject));
    server.callHandler(method("GetObject", GetObjectRequest.newBuilder()), auth.any(this::getObject));
    server.callHandler(method("Status", StatusRequest.newBuilder()), auth.users(this::status));
    server.callHandler(method("Shutdown", ShutdownRequest.newBuilder()), auth.users(this::shutdown));
  }

  private static <Req, Resp extends com.google.protobuf.MessageLite> ServiceMethod<Req, Resp> method(
      String name, com.google.protobuf.Message.Builder requestType) {
    return Authenticator.method(SERVICE, name, requestType);
  }

  private void hello(Identity identity, GrpcServerRequest<HelloRequest, HelloReply> request) {
    request.handler(ignored -> request.response().end(HelloReply.newBuilder()
        .setUser(identity.user()).setGroup(identity.group()).setClusterId(clusterId)
        .setRuntimeVersion(version).setInlineLimitBytes(inlineLimit)
        .setMaxMessageBytes(maxMessage).build()));
  }

  private void session(Identity identity, GrpcServerRequest<ClientMessage, ServerMessage> request) {
    ClientSession session = new ClientSession(identity, request.response());
    sessions.put(session.id(), session);
    request.response().writeHead();
    session.opened();
    Runnable closed = () -> {
      sessions.remove(session.id());
      plane.sessionClosed(session);
    };
    request.handler(message -> {
      switch (message.getKindCase()) {
        case SUBMIT -> plane.submit(session, message.getSubmit());
        case CANCEL -> plane.cancel(session, message.getCancel().getTaskId(),
            ControlPlane.CANCELLED_BY_USER);
        default -> { } // a newer client's message kind: ignore rather than break the stream
      }
    });
    request.endHandler(ignored -> {
      closed.run();
      request.response().end();
    });
    request.exceptionHandler(error -> closed.run());
    request.response().exceptionHandler(error -> closed.run());
  }

  private void submit(Identity identity, GrpcServerRequest<SubmitRequest, SubmitReply> request) {
    request.handler(message -> {
      ClientSession session = sessions.get(message.getSessionId());
      if (session == null || !session.isOpen()) {
        request.response().status(GrpcStatus.NOT_FOUND).statusMessage("session "
            + message.getSessionId() + " is not open on this runtime (it ended, or the runtime"
            + " restarted); create a new bulletin.Client").end();
        return;
      }
      if (!session.identity().equals(identity)) {
        request.response().status(GrpcStatus.PERMISSION_DENIED)
            .statusMessage("this session belongs to another user").end();
        return;
      }
      session.holdEvents();
      try {
        message.getTasksList().forEach(spec -> plane.submit(session, spec));
      } finally {
        session.releaseEvents();
      }
      request.response().end(SubmitReply.getDefaultInstance());
    });
  }

  private void putObject(Identity identity, GrpcServerRequest<ObjectChunk, PutObjectReply> request) {
    ObjectStore.Upload[] upload = new ObjectStore.Upload[1];
    ObjectId[] id = new ObjectId[1];
    boolean[] failed = new boolean[1];
    request.handler(chunk -> {
      if (failed[0]) {
        return;
      }
      try {
        if (upload[0] == null) {
          id[0] = ObjectId.parse(chunk.getId());
          upload[0] = plane.store().beginUpload(id[0], chunk.getSize());
        }
        upload[0].write(chunk.getData().asReadOnlyByteBuffer());
      } catch (IllegalArgumentException | ObjectStoreException e) {
        failed[0] = true;
        if (upload[0] != null) {
          upload[0].close();
        }
        request.response().status(GrpcStatus.INVALID_ARGUMENT).statusMessage(e.getMessage()).end();
      }
    });
    request.endHandler(ignored -> {
      if (failed[0]) {
        return;
      }
      if (upload[0] == null) {
        request.response().status(GrpcStatus.INVALID_ARGUMENT)
            .statusMessage("PutObject needs at least one chunk").end();
        return;
      }
      try (ObjectStore.Upload finished = upload[0]) {
        ObjectId stored = finished.commit();
        plane.uploaded(stored); // a worker's large result is claimed when it reports the call
        request.response().end(PutObjectReply.newBuilder().setId(stored.hex())
            .setSize(plane.store().size(stored)).build());
      } catch (ObjectStoreException e) {
        request.response().status(GrpcStatus.DATA_LOSS).statusMessage(e.getMessage()).end();
      }
    });
    // A client that dies mid-upload leaves nothing visible: the partial file goes away.
    request.exceptionHandler(error -> {
      if (upload[0] != null) {
        upload[0].close();
      }
    });
  }

  private void getObject(Identity identity, GrpcServerRequest<GetObjectRequest, ObjectChunk> request) {
    request.handler(message -> {
      ObjectId id;
      ByteBuffer bytes;
      try {
        id = ObjectId.parse(message.getId());
        bytes = plane.store().read(id);
      } catch (IllegalArgumentException | ObjectStoreException e) {
        request.response().status(GrpcStatus.NOT_FOUND).statusMessage(e.getMessage()).end();
        return;
      }
      long size = bytes.remaining();
      boolean first = true;
      while (first || bytes.hasRemaining()) {
        ByteBuffer slice = bytes.slice();
        slice.limit(Math.min(CHUNK_BYTES, bytes.remaining()));
        bytes.position(bytes.position() + slice.remaining());
        ObjectChunk.Builder chunk = ObjectChunk.newBuilder().setData(ByteString.copyFrom(slice));
        if (first) {
          chunk.setId(id.hex()).setSize(size);
          first = false;
        }
        request.response().write(chunk.build());
      }
      if (identity.worker()) {
        request.response().end(); // a worker fetching a call's input: nothing to release
      } else {
        request.response().end().onComplete(done -> plane.fetched(id));
      }
    });
  }

  private void status(Identity identity, GrpcServerRequest<StatusRequest, ClusterStatus> request) {
    request.handler(ignored -> request.response().end(status.build()));
  }

  private void shutdown(Identity identity, GrpcServerRequest<ShutdownRequest, ShutdownReply> request) {
    request.handler(ignored -> {
      if (!identity.owner()) {
        request.response().status(GrpcStatus.PERMISSION_DENIED).statusMessage("only "
            + "the user who started the cluster may stop it; you are " + identity.user()).end();
        return;
      }
      request.response().end(ShutdownReply.getDefaultInstance())
          .onComplete(done -> shutdown.run());
    });
  }
}
