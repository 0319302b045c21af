package dev.bulletin.runtime.api;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.protocol.EventBatch;
import dev.bulletin.protocol.ServerMessage;
import dev.bulletin.protocol.SessionOpened;
import dev.bulletin.protocol.TaskEvent;
import dev.bulletin.runtime.identity.Identity;
import dev.bulletin.runtime.task.TaskEventSink;
import io.vertx.grpc.server.GrpcServerResponse;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.UUID;

/**
 * One client's Session stream: where its tasks' events go, and the functions it has sent (kept
 * in the store while the session lasts, so later calls send only their id).
 *
 * <p>Events produced in one turn of the event loop leave together as one message at the end of
 * it: a Submit batch, or a call's end and the pass that starts the next calls and explains the
 * waiting ones, cost one write. A write costs far more than an event, so this is what keeps a
 * pipelined map cheap. While the client has many calls going (a map, not a few blocking
 * calls), events wait up to {@link #BUSY_FLUSH_MILLIS} to share a message: fewer messages, and
 * half the client's receive work per call; a lone call still hears of its end at once.
 */
public final class ClientSession implements TaskEventSink {
  private final String id = UUID.randomUUID().toString();
  private final Identity identity;
  private final GrpcServerResponse<?, ServerMessage> response;
  private final Set<ObjectKey> functions = new HashSet<>();
  private final SessionHolds objects;
  private static final long BUSY_FLUSH_MILLIS = 1;
  /** More calls than this not ended: the session streams a batch (a map, a loop of submits). */
  private static final int BUSY_CALLS = 4;
  private List<TaskEvent> held = new ArrayList<>();
  private boolean flushQueued;
  /** Calls accepted for this session and not ended: a call refused at submit is not one. */
  private final Set<String> callsGoing = new HashSet<>();
  private boolean open = true;
  /** The event loop the session's stream lives on; null only outside Vert.x (then: no batching). */
  private final io.vertx.core.Context context = io.vertx.core.Vertx.currentContext();

  ClientSession(Identity identity, GrpcServerResponse<?, ServerMessage> response,
      SessionHolds holds) {
    this.identity = identity;
    this.response = response;
    this.objects = holds;
  }

  String id() {
    return id;
  }

  public Identity identity() {
    return identity;
  }

  /** The store references this session holds besides its functions. */
  public SessionHolds holds() {
    return objects;
  }

  public String namespace() {
    return objects.namespace();
  }

  /** Tells the client its session id; the first message on the stream. */
  void opened() {
    write(ServerMessage.newBuilder().setOpened(SessionOpened.newBuilder().setSessionId(id))
        .build());
  }

  @Override
  public void send(TaskEvent event) {
    if (!open) {
      return;
    }
    if (context == null) {
      write(ServerMessage.newBuilder().setEvent(event).build());
      return;
    }
    held.add(event);
    if (isEnd(event.getState())) {
      callsGoing.remove(event.getTaskId());
    }
    if (!flushQueued) {
      flushQueued = true;
      if (callsGoing.size() > BUSY_CALLS) {
        context.owner().setTimer(BUSY_FLUSH_MILLIS, ignored -> flushHeld());
      } else {
        context.runOnContext(ignored -> flushHeld());
      }
    }
  }

  /** A call of this session was accepted; its end event will come through {@link #send}. */
  public void callAccepted(String taskId) {
    callsGoing.add(taskId);
  }

  private static boolean isEnd(dev.bulletin.protocol.TaskState state) {
    return state == dev.bulletin.protocol.TaskState.FINISHED
        || state == dev.bulletin.protocol.TaskState.ERROR
        || state == dev.bulletin.protocol.TaskState.CANCELLED;
  }

  private void flushHeld() {
    flushQueued = false;
    writeHeld();
  }

  private void writeHeld() {
    List<TaskEvent> events = held;
    held = new ArrayList<>();
    if (!open || events.isEmpty()) {
      return;
    }
    write(events.size() == 1 ? ServerMessage.newBuilder().setEvent(events.get(0)).build()
        : ServerMessage.newBuilder().setEvents(EventBatch.newBuilder().addAllEvents(events))
            .build());
  }

  private void write(ServerMessage message) {
    try {
      response.write(message);
    } catch (IllegalStateException streamGone) {
      // The client reset the stream; the connection's close handler ends the session.
      open = false;
    }
  }

  /** @return true if this session did not hold the function yet */
  public boolean holdFunction(ObjectKey id) {
    return functions.add(id);
  }

  public boolean holdsFunction(ObjectKey id) {
    return functions.contains(id);
  }

  /** Marks the session closed and hands back the functions it held. */
  public Set<ObjectKey> close() {
    writeHeld();
    open = false;
    Set<ObjectKey> held = Set.copyOf(functions);
    functions.clear();
    return held;
  }

  public boolean isOpen() {
    return open;
  }
}
