package dev.bulletin.runtime.api;

import dev.bulletin.protocol.ServerMessage;
import dev.bulletin.runtime.control.ControlPlane;
import dev.bulletin.runtime.identity.Identity;
import io.vertx.core.Vertx;
import io.vertx.grpc.common.GrpcStatus;
import io.vertx.grpc.server.GrpcServerResponse;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Optional;
import java.util.logging.Logger;

/**
 * The runtime's client sessions, attached to a Session stream or detached from one
 * (docs/durability.md, "Reconnecting clients and workers"). A session whose stream breaks is
 * detached, not ended: its calls go on and its events are kept, for the reconnect window; a
 * client that opens a stream with the session's id, the same identity and the
 * "bulletin-resume-after" metadata resumes it. A session whose client half-closed its stream,
 * or whose window passed, ends as it always did: its calls stop and its holds are released.
 *
 * <p>For a runtime restored from its journal: {@link #restoreDetached} recreates a session the
 * journal knew, detached, so that its client can resume it; tasks restored for it name it as
 * their sink. Used on the control plane's event loop only.
 */
public final class SessionRegistry {
  /** The Session stream's metadata asking to resume: the seq of the last event the client saw. */
  static final String RESUME_HEADER = "bulletin-resume-after";
  private static final Logger LOG = Logger.getLogger(SessionRegistry.class.getName());

  /** Refused to open or resume a session: the status and message the stream ends with. */
  static final class Refused extends Exception {
    final GrpcStatus status;

    Refused(GrpcStatus status, String message) {
      super(message, null, false, false);
      this.status = status;
    }
  }

  private final Vertx vertx;
  private final ControlPlane plane;
  private final Duration window;
  private final Sessions holds;
  private final Map<String, ClientSession> sessions = new HashMap<>();
  /** The window timer of each detached session. */
  private final Map<ClientSession, Long> expiries = new HashMap<>();

  /**
   * @param window how long a session whose stream broke is kept for its client to resume it;
   *     zero ends it at once
   */
  public SessionRegistry(Vertx vertx, ControlPlane plane, Duration window) {
    this.vertx = vertx;
    this.plane = plane;
    this.window = window;
    this.holds = new Sessions(plane.objects(), plane.journaling()::hold,
        plane.journaling()::holdsReleased,
        (millis, task) -> vertx.setTimer(millis, id -> task.run()), window);
  }

  public Duration window() {
    return window;
  }

  /** A session that has not ended (attached or detached). */
  public Optional<ClientSession> find(String sessionId) {
    return Optional.ofNullable(sessions.get(sessionId));
  }

  /** Sessions whose stream broke and whose client has not resumed them yet. */
  public int detached() {
    return expiries.size();
  }

  /**
   * Recreates a session the journal knew before a restart, detached: its client resumes it
   * within the window, or it ends. {@code lastSeq} is the seq of the last event the session
   * had (the next event is lastSeq + 1; a client that resumes after it, having seen events the
   * journal did not number, resumes too, and numbering goes on after its seq); events the client
   * did not see before the crash are not replayed: send the restored tasks' current state to
   * the session instead. Call it on the control plane's event loop (the session batches its
   * events on the loop it was created on).
   *
   * @throws IllegalArgumentException if the id is malformed or is open for another user
   */
  public ClientSession restoreDetached(String sessionId, Identity identity, long lastSeq) {
    ClientSession known = sessions.get(sessionId);
    if (known != null) {
      if (!known.identity().equals(identity)) {
        throw new IllegalArgumentException("session " + sessionId + " belongs to another user");
      }
      return known;
    }
    ClientSession session = new ClientSession(sessionId, identity,
        holds.claim(sessionId, identity), lastSeq);
    session.workersUnknown();
    sessions.put(sessionId, session);
    startWindow(session);
    return session;
  }

  /**
   * The object holds of the session an object call names (see {@link Sessions}).
   *
   * @throws IllegalArgumentException if the id is malformed or belongs to another user
   * @throws Sessions.Ended if the session ended
   */
  SessionHolds holds(String sessionId, Identity identity) {
    return holds.forObjectCall(sessionId, identity);
  }

  /** A new session for a stream (not attached yet: see {@link #attach}). */
  ClientSession open(String sessionId, Identity identity) throws Refused {
    if (sessions.containsKey(sessionId)) {
      throw new Refused(GrpcStatus.ALREADY_EXISTS, "session " + sessionId + " is open already;"
          + " a client resumes it with the " + RESUME_HEADER + " metadata, or opens a session"
          + " with a new id");
    }
    ClientSession session;
    try {
      session = new ClientSession(sessionId, identity, holds.claim(sessionId, identity), 0);
    } catch (IllegalArgumentException e) {
      throw new Refused(GrpcStatus.INVALID_ARGUMENT, e.getMessage());
    }
    sessions.put(sessionId, session);
    return session;
  }

  /**
   * The session a reconnecting client resumes. Only its own user may: another user who learnt
   * the id is refused. A session still attached to a stream the runtime has not seen break
   * (the client saw it break first) is taken over.
   */
  ClientSession resume(String sessionId, Identity identity, long afterSeq) throws Refused {
    ClientSession session = sessions.get(sessionId);
    if (session == null) {
      throw new Refused(GrpcStatus.NOT_FOUND, "session " + sessionId + " is not kept on this"
          + " runtime: its reconnect window (" + window.toSeconds() + " s) passed, its client"
          + " closed it, or the runtime restarted without it; its calls were stopped. Create a"
          + " new bulletin.Client and submit them again");
    }
    if (!session.identity().equals(identity)) {
      LOG.warning("refused to resume session " + sessionId + " of user "
          + session.identity().user() + " for user " + identity.user());
      throw new Refused(GrpcStatus.PERMISSION_DENIED, "session " + sessionId
          + " belongs to another user");
    }
    if (!session.canResumeAfter(afterSeq)) {
      end(session, "its client asked for events after " + afterSeq + " but the runtime had"
          + " dropped some of them (more than " + SessionEventLog.MAX_EVENTS + " unacknowledged)");
      throw new Refused(GrpcStatus.FAILED_PRECONDITION, "session " + sessionId + " cannot be"
          + " resumed after event " + afterSeq + ": events it needs are gone (more than "
          + SessionEventLog.MAX_EVENTS + " unacknowledged); it was ended. Create a new"
          + " bulletin.Client");
    }
    GrpcServerResponse<?, ServerMessage> old = session.response();
    if (old != null) {
      session.detach();
      old.cancel(); // the old stream's handlers see it is no longer the session's and do nothing
    }
    return session;
  }

  /** Gives the session its stream and sends what the client has not seen. */
  void attach(ClientSession session, GrpcServerResponse<?, ServerMessage> stream, long afterSeq,
      boolean resumed) {
    Long timer = expiries.remove(session);
    if (timer != null) {
      vertx.cancelTimer(timer);
    }
    if (resumed) {
      LOG.info("session " + session.id() + " of " + session.identity().user()
          + " resumed after event " + afterSeq + " (" + (session.lastSeq() - afterSeq)
          + " to replay)");
    }
    session.attach(stream, afterSeq, resumed, window.toMillis() / 1000.0);
  }

  /** The stream broke (reset, connection lost): the session waits for its client. */
  void streamBroke(ClientSession session, GrpcServerResponse<?, ServerMessage> stream) {
    if (!session.isOpen() || (session.attached() && session.response() != stream)
        || expiries.containsKey(session)) {
      return; // a stream the session left already, or a second report of the same break
    }
    session.detach();
    if (window.isZero()) {
      end(session, "its stream broke");
      return;
    }
    LOG.info("session " + session.id() + " of " + session.identity().user() + " lost its"
        + " stream; kept " + window.toSeconds() + " s for its client to resume it");
    startWindow(session);
  }

  /** The client half-closed the stream: it ends the session. */
  void streamEnded(ClientSession session, GrpcServerResponse<?, ServerMessage> stream) {
    if (session.response() == stream) {
      end(session, null);
    }
  }

  private void startWindow(ClientSession session) {
    long timer = vertx.setTimer(Math.max(1, window.toMillis()), id -> {
      // Not resumed (and detached again) meanwhile. The ids are boxed: compared with ==, any
      // past the Long cache (128 on) differed, and every later window never ended its session.
      if (id.equals(expiries.get(session))) {
        end(session, "its client did not resume it within " + window.toSeconds() + " s");
      }
    });
    expiries.put(session, timer);
  }

  /** Ends a session: its calls stop, its holds go. */
  void end(ClientSession session, String why) {
    Long timer = expiries.remove(session);
    if (timer != null) {
      vertx.cancelTimer(timer);
    }
    if (sessions.remove(session.id(), session)) {
      if (why != null) {
        LOG.info("session " + session.id() + " of " + session.identity().user() + " ended: "
            + why);
      }
      plane.sessionClosed(session);
      holds.remove(session.holds().sessionId());
    }
  }

  /**
   * The runtime is being stopped on purpose (Shutdown): every attached stream ends cleanly, so
   * clients fail their pending calls at once instead of waiting to reconnect to a runtime
   * that is not coming back.
   */
  public void endStreams() {
    for (ClientSession session : sessions.values()) {
      GrpcServerResponse<?, ServerMessage> stream = session.response();
      if (stream != null) {
        session.detach();
        try {
          stream.end();
        } catch (IllegalStateException alreadyGone) {
          // its client went away first
        }
      }
    }
  }
}
