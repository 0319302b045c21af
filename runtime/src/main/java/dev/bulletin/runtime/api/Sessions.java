package dev.bulletin.runtime.api;

import dev.bulletin.runtime.objects.ObjectDirectory;
import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.runtime.identity.Identity;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.Consumer;
import java.util.regex.Pattern;

/**
 * The object holds of each client session, by the session id the client sends as the
 * "bulletin-session" metadata of every call. Object RPCs may arrive before the Session stream
 * that shares the id; both find the same holds. Used on the control plane's loop only.
 *
 * <p>Holds no session stream has claimed yet are unclaimed: if none claims them within the
 * reconnect window (at least {@link #MIN_UNCLAIMED_MILLIS}), they are released, as a session's
 * would be had its stream broken. Without that, an object call naming a session that never
 * opens (a client killed between its first upload and its stream, or a user sending made-up
 * ids) would keep its objects, and the holds themselves, for the runtime's life. The ids of
 * sessions that ended are remembered (the latest {@link #ENDED_REMEMBERED}): an object call that
 * names one, such as a transfer of a client that closed or was killed, is refused instead of
 * starting holds that nothing would release.
 */
final class Sessions {
  static final String HEADER = "bulletin-session";
  /**
   * The least time holds wait for their session's stream (a client opens it before it
   * uploads, so this is only a margin for the two to race).
   */
  static final long MIN_UNCLAIMED_MILLIS = 5_000;
  static final int ENDED_REMEMBERED = 10_000;
  private static final Pattern ID = Pattern.compile("[A-Za-z0-9_-]{8,64}");

  /** An object call named a session that has ended. */
  static final class Ended extends RuntimeException {
    Ended(String message) {
      super(message, null, false, false);
    }
  }

  /** Runs a task after a delay on the loop that uses these sessions. */
  @FunctionalInterface
  interface Timer {
    void after(long millis, Runnable task);
  }

  /** Hears a session's holds change: {@code delta} +1 taken, -1 dropped. */
  @FunctionalInterface
  public interface HoldListener {
    void changed(String sessionId, Identity identity, ObjectKey key, boolean function,
        int delta);
  }

  private final ObjectDirectory objects;
  private final Map<String, SessionHolds> holds = new HashMap<>();
  /** Holds an object call started and no session stream has claimed yet. */
  private final Map<String, SessionHolds> unclaimed = new HashMap<>();
  /** Sessions that ended, the latest first out, with their namespace. */
  private final Map<String, String> ended = new LinkedHashMap<>() {
    @Override
    protected boolean removeEldestEntry(Map.Entry<String, String> eldest) {
      return size() > ENDED_REMEMBERED;
    }
  };
  /** Hears each hold taken or dropped (the journal). */
  private final HoldListener listener;
  /** Hears unclaimed holds released (the journal forgets their session). */
  private final Consumer<String> unclaimedReleased;
  private final Timer timer;
  private final long unclaimedMillis;

  /** @param window the reconnect window: unclaimed holds wait as long for their stream */
  Sessions(ObjectDirectory objects, HoldListener listener, Consumer<String> unclaimedReleased,
      Timer timer, java.time.Duration window) {
    this.objects = objects;
    this.listener = listener;
    this.unclaimedReleased = unclaimedReleased;
    this.timer = timer;
    this.unclaimedMillis = Math.max(window.toMillis(), MIN_UNCLAIMED_MILLIS);
  }

  /**
   * The holds of a session a stream opens, resumes or the journal restores: claimed by it, and
   * released when it ends ({@link #remove}).
   *
   * @throws IllegalArgumentException if the id is malformed or belongs to another user
   */
  SessionHolds claim(String sessionId, Identity identity) {
    SessionHolds found = find(sessionId, identity);
    unclaimed.remove(sessionId);
    ended.remove(sessionId);
    return found;
  }

  /**
   * The holds an object call names: its session's, or unclaimed holds the session's stream,
   * not opened yet, claims when it opens.
   *
   * @throws IllegalArgumentException if the id is malformed or belongs to another user
   * @throws Ended if the session ended
   */
  SessionHolds forObjectCall(String sessionId, Identity identity) {
    String endedIn = ended.get(sessionId);
    if (endedIn != null) {
      if (!endedIn.equals(ObjectKey.namespaceOf(identity.user()))) {
        throw new IllegalArgumentException("session " + sessionId + " belongs to another user");
      }
      throw new Ended("session " + sessionId + " has ended (its client closed"
          + " it, or did not resume it within the reconnect window); create a new"
          + " bulletin.Client");
    }
    boolean known = holds.containsKey(sessionId);
    SessionHolds found = find(sessionId, identity);
    if (!known) {
      unclaimed.put(sessionId, found);
      timer.after(unclaimedMillis, () -> {
        if (unclaimed.remove(sessionId, found)) {
          holds.remove(sessionId, found);
          found.releaseAll();
          unclaimedReleased.accept(sessionId);
        }
      });
    }
    return found;
  }

  private SessionHolds find(String sessionId, Identity identity) {
    if (sessionId == null || !ID.matcher(sessionId).matches()) {
      throw new IllegalArgumentException("the " + HEADER + " metadata must be 8-64 characters of"
          + " [A-Za-z0-9_-], got " + sessionId + "; upgrade the bulletin client");
    }
    String namespace = ObjectKey.namespaceOf(identity.user());
    SessionHolds found = holds.computeIfAbsent(sessionId,
        id -> new SessionHolds(id, namespace, objects,
            (key, delta) -> listener.changed(id, identity, key, false, delta)));
    if (!found.namespace().equals(namespace)) {
      throw new IllegalArgumentException("session " + sessionId + " belongs to another user");
    }
    return found;
  }

  /** Forgets a session that ended (the control plane released its holds). */
  void remove(String sessionId) {
    SessionHolds gone = holds.remove(sessionId);
    if (gone != null) {
      ended.put(sessionId, gone.namespace());
    }
  }
}
