package dev.bulletin.runtime.impl;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.protocol.ServerMessage;
import dev.bulletin.protocol.TaskEvent;
import dev.bulletin.runtime.identity.Identity;
import dev.bulletin.runtime.task.TaskEventSink;
import io.vertx.grpc.server.GrpcServerResponse;
import java.util.HashSet;
import java.util.Set;

/**
 * One client's Session stream: where its tasks' events go, and the functions it has sent (kept
 * in the store while the session lasts, so later calls send only their id).
 */
final class ClientSession implements TaskEventSink {
  private final Identity identity;
  private final GrpcServerResponse<?, ServerMessage> response;
  private final Set<ObjectKey> functions = new HashSet<>();
  private final SessionHolds holds;
  private boolean open = true;

  ClientSession(Identity identity, GrpcServerResponse<?, ServerMessage> response,
      SessionHolds holds) {
    this.identity = identity;
    this.response = response;
    this.holds = holds;
  }

  Identity identity() {
    return identity;
  }

  /** The store references this session holds besides its functions. */
  SessionHolds holds() {
    return holds;
  }

  String namespace() {
    return holds.namespace();
  }

  @Override
  public void send(TaskEvent event) {
    if (!open) {
      return;
    }
    try {
      response.write(ServerMessage.newBuilder().setEvent(event).build());
    } catch (IllegalStateException streamGone) {
      // The client reset the stream; the connection's close handler ends the session.
      open = false;
    }
  }

  /** @return true if this session did not hold the function yet */
  boolean holdFunction(ObjectKey id) {
    return functions.add(id);
  }

  boolean holdsFunction(ObjectKey id) {
    return functions.contains(id);
  }

  /** Marks the session closed and hands back the functions it held. */
  Set<ObjectKey> close() {
    open = false;
    Set<ObjectKey> held = Set.copyOf(functions);
    functions.clear();
    return held;
  }

  boolean isOpen() {
    return open;
  }
}
