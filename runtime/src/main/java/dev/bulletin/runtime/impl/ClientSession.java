package dev.bulletin.runtime.impl;

import dev.bulletin.bridge.ObjectId;
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
  private final Set<ObjectId> functions = new HashSet<>();
  private boolean open = true;

  ClientSession(Identity identity, GrpcServerResponse<?, ServerMessage> response) {
    this.identity = identity;
    this.response = response;
  }

  Identity identity() {
    return identity;
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
  boolean holdFunction(ObjectId id) {
    return functions.add(id);
  }

  boolean holdsFunction(ObjectId id) {
    return functions.contains(id);
  }

  /** Marks the session closed and hands back the functions it held. */
  Set<ObjectId> close() {
    open = false;
    Set<ObjectId> held = Set.copyOf(functions);
    functions.clear();
    return held;
  }

  boolean isOpen() {
    return open;
  }
}
