package dev.bulletin.worker.impl;

import dev.bulletin.bridge.ObjectId;
import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.bridge.UserFolder;
import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * The resident values (issue 29, {@code bulletin._runtime._resident}) that this agent's
 * executors spilled to the store before they ended: for each user, which spill object holds
 * each of their handles. An executor that keeps values on its GPU is asked to spill them before
 * it ends for any reason but its own values' end (another user's call on its GPU, its idle
 * time, a retirement), so the GPU is free of them and the user's next call, on any of this
 * agent's executors, restores them ({@code spilled} in {@link ExecutorCall}).
 *
 * <p>A spill object is an ordinary store object of the user's namespace, holding one reference
 * here while one of its handles has not been spilled again since; so it is counted in the
 * user's share of the store like anything else they hold.
 */
final class ResidentSpills {

  private static final Logger LOG = Logger.getLogger(ResidentSpills.class.getName());

  private final ObjectStore store;
  /** By user: handle id to the spill object that holds it. Guarded by this. */
  private final Map<String, Map<String, ObjectKey>> handles = new HashMap<>();

  ResidentSpills(ObjectStore store) {
    this.store = store;
  }

  /**
   * Asks an idle executor to spill what it keeps, and publishes the spill object; nothing when
   * it keeps nothing, is gone, or was stopped (its process is killed: nothing to ask).
   */
  void spillFrom(ExecutorProcess executor) {
    String owner = executor.owner();
    if (owner == null || !executor.isAlive() || executor.stopped()) {
      return;
    }
    Path staged = store.stagingFolderOf(owner).resolve(".spill-" + executor.id());
    try {
      String reply = executor.spill(staged);
      if (reply == null || reply.isBlank() || reply.equals("null")) {
        return;
      }
      JsonObject spill = new JsonObject(reply);
      ObjectKey key = store.adopt(new ObjectKey(owner, ObjectId.parse(spill.getString("id"))),
          staged);
      record(owner, key, spill.getJsonArray("handles"));
      LOG.info(() -> "executor " + executor.id() + " spilled " + spill.getJsonArray("handles")
          .size() + " resident value(s) of " + owner + " (" + spill.getLong("size")
          + " bytes) to the store before it ends");
    } catch (RuntimeException e) {
      LOG.log(Level.WARNING, "executor " + executor.id() + " could not spill the resident"
          + " values of " + owner + "; they are lost: " + e.getMessage());
    } finally {
      UserFolder.deleteTree(staged); // left only by a spill that failed half-way
    }
  }

  /** The spill objects of a user's handles, for a call of theirs: handle id to object. */
  synchronized Map<String, ObjectKey> of(String owner) {
    return Map.copyOf(handles.getOrDefault(owner, Map.of()));
  }

  /** Drops every spill of a user (their values' end). */
  synchronized void dropAll(String owner) {
    Map<String, ObjectKey> gone = handles.remove(owner);
    if (gone != null) {
      gone.values().stream().distinct().forEach(store::release);
    }
  }

  private synchronized void record(String owner, ObjectKey key, JsonArray spilled) {
    Map<String, ObjectKey> ofOwner = handles.computeIfAbsent(owner, user -> new HashMap<>());
    List<ObjectKey> before = List.copyOf(ofOwner.values());
    for (Object handle : spilled) {
      ofOwner.put(handle.toString(), key);
    }
    // An older spill none of whose handles it still holds is given back to the store; the
    // reference adopt took is the new one's (one per spill, released once).
    before.stream().distinct().filter(old -> !ofOwner.containsValue(old))
        .forEach(store::release);
    if (before.contains(key)) {
      store.release(key); // the same bytes spilled again: one reference is enough
    }
  }
}
