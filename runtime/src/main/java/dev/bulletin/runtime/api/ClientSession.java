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
import java.util.Optional;
import java.util.Set;

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
 *
 * <p>A session outlives its stream (docs/durability.md): every event is numbered and kept in a
 * {@link SessionEventLog} until the client acknowledges it, so when the stream breaks the
 * session is detached, its calls go on, and a client that resumes it on a new stream
 * ({@link #attach}) gets every event it has not seen. The {@link SessionRegistry} decides when
 * a detached session ends.
 */
public final class ClientSession implements TaskEventSink {
  private final String id;
  private final Identity identity;
  private final Set<ObjectKey> functions = new HashSet<>();
  private final SessionHolds objects;
  private final SessionEventLog log;
  private static final long BUSY_FLUSH_MILLIS = 1;
  /**
   * How long a lone call's progress (placed, running, why it waits) is held for its end to join
   * it: a short call then costs its client one message, not three (each wakes the client's
   * stream thread, and on a busy machine each wake-up costs more than the work).
   */
  private static final long PROGRESS_HOLD_MILLIS = 5;
  /** More calls than this not ended: the session streams a batch (a map, a loop of submits). */
  private static final int BUSY_CALLS = 4;
  /** A replay after a resume goes in messages of at most this many events and bytes. */
  private static final int REPLAY_EVENTS = 1000;
  private static final long REPLAY_BYTES = 1 << 20;
  private List<TaskEvent> held = new ArrayList<>();
  private boolean flushQueued;
  /** The timer of a flush of progress events only, or -1. */
  private long progressTimer = -1;
  /** Calls accepted for this session and not ended: a call refused at submit is not one. */
  private final Set<String> callsGoing = new HashSet<>();
  /** The stream events go to; null while detached. */
  private GrpcServerResponse<?, ServerMessage> response;
  private boolean ended;
  /** Session-stream messages processed, over all its streams (SessionOpened.client_messages). */
  private long clientMessages;
  /**
   * The workers its calls were sent to, where its resident values may be (issue 29); null when
   * not known (a session restored from the journal, whose calls ran before the restart).
   */
  private Set<String> workersUsed = new HashSet<>();
  /** The event loop the session's stream lives on; null only outside Vert.x (then: no batching). */
  private final io.vertx.core.Context context = io.vertx.core.Vertx.currentContext();

  /** A detached session; {@link #attach} gives it a stream. */
  ClientSession(String id, Identity identity, SessionHolds holds, long lastSeq) {
    this.id = id;
    this.identity = identity;
    this.objects = holds;
    this.log = new SessionEventLog(lastSeq);
  }

  @Override
  public void sentTo(String workerId) {
    if (workersUsed != null) {
      workersUsed.add(workerId);
    }
  }

  /**
   * The workers that may keep its resident values: those its calls were sent to, or empty when
   * that is not known (then: every worker).
   */
  public Optional<Set<String>> workersUsed() {
    return Optional.ofNullable(workersUsed);
  }

  /** Restored from the journal: its calls may have run anywhere before the restart. */
  void workersUnknown() {
    workersUsed = null;
  }

  /** The session's id: the client's bulletin-session metadata, and what Submit names. */
  @Override
  public String sessionId() {
    return id;
  }

  public String id() {
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

  /** The seq of the last event produced for this session (0: none yet). */
  public long lastSeq() {
    return log.lastSeq();
  }

  /** Whether a stream carries the session's events now. */
  public boolean attached() {
    return response != null;
  }

  GrpcServerResponse<?, ServerMessage> response() {
    return response;
  }

  boolean canResumeAfter(long seq) {
    return log.canReplayAfter(seq);
  }

  /**
   * Gives the session a stream: SessionOpened first, then every kept event after
   * {@code afterSeq} (a fresh session has none), then new events as they come.
   */
  void attach(GrpcServerResponse<?, ServerMessage> stream, long afterSeq, boolean resumed,
      double windowSeconds) {
    response = stream;
    held = new ArrayList<>(); // kept in the log: the replay below carries them
    log.catchUp(afterSeq);
    log.acknowledge(afterSeq);
    List<TaskEvent> replay = log.after(afterSeq);
    // last_seq is what the client waits to see before it counts itself caught up (and sends
    // its unanswered Submits again): the last replayed event's seq. A restored session's
    // numbering starts past its reservation, so with nothing to replay lastSeq is a seq no
    // event will ever carry, and the client would wait for it forever.
    long caughtUp = replay.isEmpty() ? afterSeq : log.lastSeq();
    write(ServerMessage.newBuilder().setOpened(SessionOpened.newBuilder().setSessionId(id)
        .setResumed(resumed).setLastSeq(caughtUp).setClientMessages(clientMessages)
        .setReconnectWindowSeconds(windowSeconds)).build());
    // The kept events end at lastSeq without a gap; a restored session's numbering jumps past
    // its journaled reservation, so they need not start right after afterSeq.
    long seq = log.lastSeq() - replay.size();
    int from = 0;
    while (from < replay.size()) {
      int to = from;
      long bytes = 0;
      while (to < replay.size() && to - from < REPLAY_EVENTS && bytes < REPLAY_BYTES) {
        bytes += replay.get(to++).getSerializedSize();
      }
      seq += to - from;
      writeEvents(replay.subList(from, to), seq);
      from = to;
    }
  }

  /** The stream broke: events are kept for a resume. */
  void detach() {
    response = null;
    held = new ArrayList<>();
  }

  /** A message arrived on the session's stream. */
  void countClientMessage() {
    clientMessages++;
  }

  /** The client has seen every event up to seq. */
  void acknowledge(long seq) {
    log.acknowledge(seq);
  }

  @Override
  public void send(TaskEvent event) {
    if (ended) {
      return;
    }
    long seq = log.add(event);
    if (isEnd(event.getState())) {
      callsGoing.remove(event.getTaskId());
    }
    if (response == null) {
      return; // kept for the client's resume
    }
    if (context == null) {
      writeEvents(List.of(event), seq);
      return;
    }
    held.add(event);
    boolean progress = !isEnd(event.getState())
        && event.getDetailCase() != TaskEvent.DetailCase.OUTPUT;
    if (flushQueued && (progress || progressTimer < 0)) {
      return; // a flush is on its way that is not later than this event wants
    }
    if (progressTimer >= 0) {
      context.owner().cancelTimer(progressTimer); // output or an end: it goes now, with the rest
      progressTimer = -1;
    }
    flushQueued = true;
    if (callsGoing.size() > BUSY_CALLS) {
      context.owner().setTimer(BUSY_FLUSH_MILLIS, ignored -> flushHeld());
    } else if (progress) {
      progressTimer = context.owner().setTimer(PROGRESS_HOLD_MILLIS, ignored -> {
        progressTimer = -1;
        flushHeld();
      });
    } else {
      context.runOnContext(ignored -> flushHeld());
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
    if (ended || response == null || events.isEmpty()) {
      return;
    }
    // The held events are the log's newest: the last of them has its last seq.
    writeEvents(events, log.lastSeq());
  }

  private void writeEvents(List<TaskEvent> events, long lastSeq) {
    ServerMessage.Builder message = events.size() == 1
        ? ServerMessage.newBuilder().setEvent(events.get(0))
        : ServerMessage.newBuilder().setEvents(EventBatch.newBuilder().addAllEvents(events));
    write(message.setSeq(lastSeq).build());
  }

  private void write(ServerMessage message) {
    try {
      response.write(message);
    } catch (IllegalStateException streamGone) {
      // The client reset the stream; the stream's handlers detach the session. The events
      // stay in the log.
      response = null;
    }
  }

  /** @return true if this session did not hold the function yet */
  public boolean holdFunction(ObjectKey id) {
    return functions.add(id);
  }

  public boolean holdsFunction(ObjectKey id) {
    return functions.contains(id);
  }

  /** Marks the session ended and hands back the functions it held. */
  public Set<ObjectKey> close() {
    writeHeld();
    ended = true;
    response = null;
    Set<ObjectKey> held = Set.copyOf(functions);
    functions.clear();
    return held;
  }

  /** Not ended: attached to a stream, or detached and waiting for its client to resume. */
  public boolean isOpen() {
    return !ended;
  }
}
