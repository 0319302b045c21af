package dev.bulletin.runtime.api;

import dev.bulletin.runtime.control.ControlPlane;
import dev.bulletin.runtime.objects.ObjectApi;
import dev.bulletin.runtime.objects.ObjectDirectory;
import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.StoreStats;
import dev.bulletin.protocol.AdoptObjectRequest;
import dev.bulletin.protocol.ClientMessage;
import dev.bulletin.protocol.ClusterStatus;
import dev.bulletin.protocol.GetObjectRequest;
import dev.bulletin.protocol.HasObjectsReply;
import dev.bulletin.protocol.HasObjectsRequest;
import dev.bulletin.protocol.StoreStatus;
import dev.bulletin.protocol.HelloReply;
import dev.bulletin.protocol.HelloRequest;
import dev.bulletin.protocol.ObjectChunk;
import dev.bulletin.protocol.OpenTransferReply;
import dev.bulletin.protocol.OpenTransferRequest;
import dev.bulletin.protocol.PutObjectReply;
import dev.bulletin.protocol.ServerMessage;
import dev.bulletin.protocol.ShutdownReply;
import dev.bulletin.protocol.ShutdownRequest;
import dev.bulletin.protocol.StatusRequest;
import dev.bulletin.protocol.SubmitReply;
import dev.bulletin.protocol.SubmitRequest;
import dev.bulletin.runtime.identity.Identity;
import io.vertx.core.Handler;
import io.vertx.grpc.common.GrpcStatus;
import io.vertx.grpc.common.ServiceMethod;
import io.vertx.grpc.common.ServiceName;
import io.vertx.grpc.server.GrpcServer;
import io.vertx.grpc.server.GrpcServerRequest;
import io.vertx.grpc.server.GrpcServerResponse;
import java.nio.ByteBuffer;

/**
 * The client-facing gRPC service ({@code bulletin.v1.Bulletin}): authenticates each call and
 * turns messages into control-plane operations. Handlers run on the control plane's event loop.
 */
public final class GrpcApi {

  private static final ServiceName SERVICE = ServiceName.create("bulletin.v1.Bulletin");

  private final ControlPlane plane;
  /** Sessions by id, attached or detached, for Submit, object calls and resumes. */
  private final SessionRegistry sessions;
  private final StatusReport status;
  private final String clusterId;
  private final String version;
  private final long inlineLimit;
  private final long maxMessage;
  private final Runnable shutdown;
  private final ObjectApi objects;
  private final String hostId = HostIdentity.compute();

  /** The bulk data port clients are told about in Hello; 0: none. */
  private final int dataPort;
  /** The web dashboard's address told in Hello; empty: the runtime serves none. */
  private String dashboardUrl = "";
  private final dev.bulletin.runtime.objects.ArenaSpares arenaSpares;

  public GrpcApi(ControlPlane plane, SessionRegistry sessions, ObjectApi objects, int dataPort,
      StatusReport status,
      String clusterId, String version, long inlineLimit, long maxMessage, Runnable shutdown) {
    this.plane = plane;
    this.status = status;
    this.clusterId = clusterId;
    this.version = version;
    this.inlineLimit = inlineLimit;
    this.maxMessage = maxMessage;
    this.shutdown = shutdown;
    this.sessions = sessions;
    this.objects = objects;
    this.dataPort = dataPort;
    this.arenaSpares = new dev.bulletin.runtime.objects.ArenaSpares(plane::store);
  }

  /** Names the web dashboard in Hello (set before the API serves). */
  public GrpcApi dashboardUrl(String url) {
    this.dashboardUrl = url;
    return this;
  }

  public void mount(GrpcServer server, Authenticator auth) {
    server.callHandler(method("Hello", HelloRequest.newBuilder()), auth.any(this::hello));
    server.callHandler(method("Session", ClientMessage.newBuilder()), auth.users(this::session));
    server.callHandler(method("Submit", SubmitRequest.newBuilder()), auth.users(this::submit));
    // Objects move for users (in their sessions) and for workers (on behalf of a call's owner).
    server.callHandler(method("PutObject", ObjectChunk.newBuilder()),
        this.<ObjectChunk, PutObjectReply>objectCall(auth, objects::putObject));
    server.callHandler(method("GetObject", GetObjectRequest.newBuilder()),
        this.<GetObjectRequest, ObjectChunk>objectCall(auth, objects::getObject));
    server.callHandler(method("HasObjects", HasObjectsRequest.newBuilder()),
        this.<HasObjectsRequest, HasObjectsReply>objectCall(auth, objects::hasObjects));
    server.callHandler(method("AdoptObject", AdoptObjectRequest.newBuilder()),
        this.<AdoptObjectRequest, PutObjectReply>objectCall(auth, objects::adoptObject));
    server.callHandler(method("OpenTransfer", OpenTransferRequest.newBuilder()),
        this.<OpenTransferRequest, OpenTransferReply>objectCall(auth, objects::openTransfer));
    server.callHandler(method("TakeArenaSpare", dev.bulletin.protocol.ArenaSpareRequest
        .newBuilder()), this.<dev.bulletin.protocol.ArenaSpareRequest,
            dev.bulletin.protocol.ArenaSpareReply>objectCall(auth, arenaSpares::take));
    server.callHandler(method("Status", StatusRequest.newBuilder()), auth.users(this::status));
    server.callHandler(method("Shutdown", ShutdownRequest.newBuilder()), auth.users(this::shutdown));
  }

  private static <Req, Resp extends com.google.protobuf.MessageLite> ServiceMethod<Req, Resp> method(
      String name, com.google.protobuf.Message.Builder requestType) {
    return Authenticator.method(SERVICE, name, requestType);
  }

  /**
   * Object calls name the caller's session ("bulletin-session" metadata): what a user uploads
   * is held by it. A worker names instead the namespace of the call it works for.
   */
  private <Req, Resp> Handler<GrpcServerRequest<Req, Resp>> objectCall(Authenticator auth,
      ObjectApi.Handler<Req, Resp> handler) {
    return auth.any((identity, request) -> {
      try {
        ObjectApi.Caller caller;
        if (identity.worker()) {
          caller = ObjectApi.Caller.worker(request.headers().get(ObjectApi.NAMESPACE_HEADER));
        } else {
          String namespace = ObjectKey.namespaceOf(identity.user());
          String sessionId = request.headers().get(Sessions.HEADER);
          caller = ObjectApi.Caller.user(namespace,
              sessionId == null ? null : sessions.holds(sessionId, identity));
        }
        handler.handle(caller, request);
      } catch (IllegalArgumentException e) {
        request.response().status(GrpcStatus.INVALID_ARGUMENT).statusMessage(e.getMessage())
            .end();
      } catch (Sessions.Ended e) {
        request.response().status(GrpcStatus.FAILED_PRECONDITION).statusMessage(e.getMessage())
            .end();
      }
    });
  }

  private void hello(Identity identity, GrpcServerRequest<HelloRequest, HelloReply> request) {
    request.handler(ignored -> request.response().end(HelloReply.newBuilder()
        .setUser(identity.user()).setGroup(identity.group()).setClusterId(clusterId)
        .setRuntimeVersion(version).setInlineLimitBytes(inlineLimit)
        .setMaxMessageBytes(maxMessage)
        .setStoreDir(plane.store().folderOf(ObjectKey.namespaceOf(identity.user())).toString())
        .setStagingDir(plane.store().stagingFolderOf(ObjectKey.namespaceOf(identity.user()))
            .toString())
        .setHostId(hostId).setStoreCapacityBytes(plane.store().capacityBytes())
        .setDataPort(dataPort).setDashboardUrl(dashboardUrl)
        .setArenaBytes(plane.store().writerSpareBytes(ObjectKey.namespaceOf(identity.user())))
        .setHostArenaBytes(arenaSpares.budgetBytes()).build()));
  }

  private void session(Identity identity, GrpcServerRequest<ClientMessage, ServerMessage> request) {
    // Older clients send no session id: their objects are held by a session of their own.
    String header = request.headers().get(Sessions.HEADER);
    String sessionId = header != null ? header : java.util.UUID.randomUUID().toString();
    String resumeAfter = request.headers().get(SessionRegistry.RESUME_HEADER);
    GrpcServerResponse<ClientMessage, ServerMessage> response = request.response();
    ClientSession session;
    long afterSeq = 0;
    try {
      if (resumeAfter == null) {
        session = sessions.open(sessionId, identity);
      } else {
        afterSeq = parseSeq(resumeAfter);
        session = sessions.resume(sessionId, identity, afterSeq);
      }
    } catch (SessionRegistry.Refused e) {
      response.status(e.status).statusMessage(e.getMessage()).end();
      return;
    }
    response.writeHead();
    sessions.attach(session, response, afterSeq, resumeAfter != null);
    request.handler(message -> {
      if (session.response() != response) {
        return; // a stream the session left (a resume took it over)
      }
      session.countClientMessage();
      switch (message.getKindCase()) {
        case CANCEL -> plane.cancel(session, message.getCancel().getTaskId());
        case RELEASE -> release(session, message.getRelease().getIdsList());
        case SESSION_ACK -> session.acknowledge(message.getSessionAck().getSeq());
        case RELEASE_RESIDENT -> plane.releaseResident(session, false);
        default -> { } // a newer client's message kind: ignore rather than break the stream
      }
    });
    request.endHandler(ignored -> {
      sessions.streamEnded(session, response);
      response.end();
    });
    request.exceptionHandler(error -> sessions.streamBroke(session, response));
    // A reset stream (the client cancelled it) reaches the error handler only.
    request.errorHandler(error -> sessions.streamBroke(session, response));
    response.exceptionHandler(error -> sessions.streamBroke(session, response));
  }

  private static long parseSeq(String text) throws SessionRegistry.Refused {
    try {
      long seq = Long.parseLong(text.trim());
      if (seq >= 0) {
        return seq;
      }
    } catch (NumberFormatException ignored) {
      // refused below
    }
    throw new SessionRegistry.Refused(GrpcStatus.INVALID_ARGUMENT, "the "
        + SessionRegistry.RESUME_HEADER + " metadata must be the seq of the last event seen"
        + " (an integer >= 0), got '" + text + "'");
  }

  private void submit(Identity identity, GrpcServerRequest<SubmitRequest, SubmitReply> request) {
    request.handler(message -> {
      ClientSession session = sessions.find(message.getSessionId()).orElse(null);
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
      // The batch's events leave as one message when this turn ends (see ClientSession).
      long mark = plane.journaling().mark();
      plane.submit(session, message.getTasksList());
      plane.journaling().seqUsed(session);
      // Acknowledged once the journal has the accepted calls (docs/durability.md).
      io.vertx.core.Future.fromCompletionStage(plane.journaling().durable(mark),
          io.vertx.core.Vertx.currentContext()).onComplete(kept -> {
            if (kept.succeeded()) {
              request.response().end(SubmitReply.getDefaultInstance());
              return;
            }
            String why = kept.cause().getMessage();
            plane.unjournaled(session, message.getTasksList().stream()
                .map(dev.bulletin.protocol.TaskSpec::getTaskId).toList(), why);
            request.response().status(GrpcStatus.RESOURCE_EXHAUSTED).statusMessage(why).end();
          });
    });
  }

  private void release(ClientSession session, java.util.List<String> ids) {
    for (String id : ids) {
      try {
        session.holds().release(ObjectKey.of(session.namespace(), id));
      } catch (IllegalArgumentException ignored) {
        // A malformed id names nothing this session holds.
      }
    }
  }

  private void status(Identity identity, GrpcServerRequest<StatusRequest, ClusterStatus> request) {
    request.handler(asked -> {
      StoreStats store = plane.store().stats();
      ObjectDirectory objects = plane.objects();
      int listed = asked.getMaxQueuedListed() > 0 ? asked.getMaxQueuedListed() : Integer.MAX_VALUE;
      request.response().end(status.build(identity, listed).toBuilder().setStore(StoreStatus.newBuilder()
          .setObjects(store.objects()).setReferenced(store.referenced())
          .setSpilled(store.spilled()).setMemoryBytes(store.memoryBytes())
          .setSpilledBytes(store.spilledBytes()).setCapacityBytes(store.capacityBytes())
          .setWorkerObjects(objects.workerObjects()).setPulledObjects(objects.pulledObjects())
          .setPulledBytes(objects.pulledBytes())
          .setSentToWorkersBytes(objects.sentToWorkersBytes())
          .setRecycledFiles(store.recycledFiles())
          .setDataPortBytes(objects.dataPortBytes())
          .setDirectTickets(objects.direct().ticketsIssued()))
          .build());
    });
  }

  private void shutdown(Identity identity, GrpcServerRequest<ShutdownRequest, ShutdownReply> request) {
    request.handler(ignored -> {
      if (!identity.owner()) {
        request.response().status(GrpcStatus.PERMISSION_DENIED).statusMessage("only "
            + "the user who started the cluster may stop it; you are " + identity.user()).end();
        return;
      }
      sessions.endStreams();
      request.response().end(ShutdownReply.getDefaultInstance())
          .onComplete(done -> shutdown.run());
    });
  }
}
