package dev.bulletin.runtime.api;

import dev.bulletin.runtime.objects.ObjectDirectory;
import dev.bulletin.bridge.ObjectKey;
import java.util.HashMap;
import java.util.Map;

/**
 * The store references one client session holds: objects it uploaded or found with "has it?"
 * (until the client releases them after the submit that uses them, or keeps them as a scatter
 * ref), and results not fetched yet. All are released when the session ends, so a client that
 * goes away leaks nothing. Used on the control plane's event loop only.
 */
public final class SessionHolds {
  private final String sessionId;
  private final String namespace;
  /** Where references go: a result kept on a remote worker is counted there, not in a store. */
  private final ObjectDirectory objects;
  private final Map<ObjectKey, Integer> held = new HashMap<>();
  /** Set when the session ended: a transfer that finishes later must not hold for it. */
  private boolean ended;
  /** Hears each reference taken (+1) or dropped (-1): the journal. */
  private final java.util.function.ObjIntConsumer<ObjectKey> changes;

  SessionHolds(String sessionId, String namespace, ObjectDirectory objects,
      java.util.function.ObjIntConsumer<ObjectKey> changes) {
    this.sessionId = sessionId;
    this.namespace = namespace;
    this.objects = objects;
    this.changes = changes;
  }

  public String sessionId() {
    return sessionId;
  }

  String namespace() {
    return namespace;
  }

  /** Takes over one store reference the caller already took. */
  public void adopt(ObjectKey key) {
    if (ended) {
      objects.release(key); // an upload that outlived its session (the bulk port's are threads)
      return;
    }
    held.merge(key, 1, Integer::sum);
    changes.accept(key, 1);
  }

  /** Drops one of this session's references; unknown ids are ignored (already released). */
  void release(ObjectKey key) {
    if (!held.containsKey(key)) {
      return;
    }
    held.computeIfPresent(key, (k, count) -> count == 1 ? null : count - 1);
    objects.release(key);
    changes.accept(key, -1);
  }

  int count() {
    return held.values().stream().mapToInt(Integer::intValue).sum();
  }

  /** Releases everything, and deletes files the client staged but never handed over. */
  public void releaseAll() {
    ended = true;
    held.forEach((key, count) -> {
      for (int i = 0; i < count; i++) {
        objects.release(key);
      }
    });
    held.clear();
    objects.store().dropUnreferenced(namespace, stagedPrefix(sessionId));
  }

  /** Staged files of one session start with this, so its end can sweep what it left. */
  public static String stagedPrefix(String sessionId) {
    return ".stage-" + sessionId + "-";
  }
}
