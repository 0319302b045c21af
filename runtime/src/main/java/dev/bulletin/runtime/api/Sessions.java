package dev.bulletin.runtime.api;

import dev.bulletin.runtime.objects.ObjectDirectory;
import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.runtime.identity.Identity;
import java.util.HashMap;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * The object holds of each client session, by the session id the client sends as the
 * "bulletin-session" metadata of every call. Object RPCs may arrive before the Session stream
 * that shares the id; both find the same holds. Used on the control plane's loop only.
 */
final class Sessions {
  static final String HEADER = "bulletin-session";
  private static final Pattern ID = Pattern.compile("[A-Za-z0-9_-]{8,64}");

  private final ObjectDirectory objects;
  private final Map<String, SessionHolds> holds = new HashMap<>();
  /** Hears each hold taken or dropped (the journal). */
  private final HoldListener listener;

  /** Hears a session's holds change: {@code delta} +1 taken, -1 dropped. */
  @FunctionalInterface
  public interface HoldListener {
    void changed(String sessionId, Identity identity, ObjectKey key, boolean function,
        int delta);
  }

  Sessions(ObjectDirectory objects, HoldListener listener) {
    this.objects = objects;
    this.listener = listener;
  }

  /** @throws IllegalArgumentException if the id is malformed or belongs to another user */
  SessionHolds holds(String sessionId, Identity identity) {
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

  /** Forgets a session whose stream ended (its holds were released by the control plane). */
  void remove(String sessionId) {
    holds.remove(sessionId);
  }

  int open() {
    return holds.size();
  }
}
