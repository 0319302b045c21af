package dev.bulletin.worker.impl;

import dev.bulletin.bridge.ObjectId;
import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.bridge.UserFolder;
import dev.bulletin.protocol.Quantities;
import dev.bulletin.worker.ResidentLimits;
import io.vertx.core.json.JsonObject;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
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
 * here, so it counts in the user's share of the store like anything else they hold. It goes
 * when none of its handles is in it any more (they were spilled again since), when it has not
 * been used for {@link ResidentLimits#idleMillis}, or when a byte cap needs its room (oldest
 * first); the handles it held are then remembered as dropped, with why, for the next call.
 *
 * <p>Each handle belongs to the client session whose call kept it: when that session ends, its
 * handles go ({@link #dropSession}), and a spill none of whose handles is left goes with them.
 */
final class ResidentSpills {

  private static final Logger LOG = Logger.getLogger(ResidentSpills.class.getName());
  /** Dropped handles remembered per user, for the message (the oldest are forgotten). */
  private static final int DROPPED_KEPT = 1024;
  /** Ended sessions remembered, so a spill that races their end drops their handles too. */
  private static final int ENDED_KEPT = 4096;
  static final String SESSION_ENDED = "the client session that kept it ended or released it (its"
      + " client closed, did not come back within the reconnect window, or ran"
      + " %bulletin --release)";

  private final ObjectStore store;
  private final ResidentLimits limits;
  /** Told of each spill object held and let go (the runtime's directory of spills). */
  private volatile dev.bulletin.worker.SpillListener listener =
      dev.bulletin.worker.SpillListener.NONE;

  private static final class Spill {
    final String owner;
    final ObjectKey key;
    final long size;
    /** Handle id to the client session that kept it ("" when the call named none). */
    final Map<String, String> sessions;
    final List<String> handles;
    long usedNanos = System.nanoTime();

    Spill(String owner, ObjectKey key, long size, Map<String, String> sessions) {
      this.owner = owner;
      this.key = key;
      this.size = size;
      this.sessions = Map.copyOf(sessions);
      this.handles = List.copyOf(sessions.keySet());
    }
  }

  /** By user: handle id to the spill that holds it. Guarded by this. */
  private final Map<String, Map<String, Spill>> handles = new HashMap<>();
  /** By user: handle id to why it was dropped. Guarded by this. */
  private final Map<String, LinkedHashMap<String, String>> dropped = new HashMap<>();
  /** Sessions that ended, as "namespace session", oldest first. Guarded by this. */
  private final Set<String> ended = new LinkedHashSet<>();

  ResidentSpills(ObjectStore store, ResidentLimits limits) {
    this.store = store;
    this.limits = limits;
  }

  void listen(dev.bulletin.worker.SpillListener listener) {
    this.listener = listener == null ? dev.bulletin.worker.SpillListener.NONE : listener;
  }

  /**
   * Asks an idle executor to spill what it keeps, and publishes the spill object; nothing when
   * it keeps nothing, is gone, or was stopped (its process is killed: nothing to ask).
   */
  void spillFrom(ExecutorProcess executor) {
    String owner = executor.owner();
    if (owner == null || executor.keeps() == 0 || !executor.isAlive() || executor.stopped()) {
      return;
    }
    Path staged = store.stagingFolderOf(owner).resolve(".spill-" + executor.id());
    try {
      // Pre-faulted memory of the host's arena, when it has some: the first touch of new
      // shared-memory pages costs several times the copy itself. The pickle around the values
      // adds a little: the margin.
      long size = executor.keeps();
      store.handOutSpare(owner, size + Math.max(1 << 20, size / 64), staged.getFileName()
          .toString());
      String reply = executor.spill(staged);
      if (reply == null || reply.isBlank() || reply.equals("null")) {
        return;
      }
      JsonObject answer = new JsonObject(reply);
      ObjectKey key = store.adopt(new ObjectKey(owner, ObjectId.parse(answer.getString("id"))),
          staged);
      JsonObject sessions = answer.getJsonObject("sessions", new JsonObject());
      Map<String, String> handles = new LinkedHashMap<>();
      answer.getJsonArray("handles").forEach(handle -> handles.put(handle.toString(),
          sessions.getString(handle.toString(), "")));
      Spill spill = record(owner, key, answer.getLong("size"), handles);
      LOG.info(() -> "executor " + executor.id() + " spilled " + spill.handles.size()
          + " resident value(s) of " + owner + " (" + spill.size + " bytes) to the store");
    } catch (RuntimeException e) {
      LOG.log(Level.WARNING, "executor " + executor.id() + " could not spill the resident"
          + " values of " + owner + "; they are lost: " + e.getMessage());
    } finally {
      UserFolder.deleteTree(staged); // left only by a spill that failed half-way
    }
  }

  /**
   * The spill objects of a user's handles, for a call of theirs (handle id to object); they
   * count as used now.
   */
  synchronized Map<String, ObjectKey> of(String owner) {
    Map<String, ObjectKey> of = new HashMap<>();
    handles.getOrDefault(owner, Map.of()).forEach((handle, spill) -> {
      spill.usedNanos = System.nanoTime();
      of.put(handle, spill.key);
    });
    return of;
  }

  /** Why each of a user's dropped handles went, for a call of theirs. */
  synchronized Map<String, String> droppedOf(String owner) {
    return Map.copyOf(dropped.getOrDefault(owner, new LinkedHashMap<>()));
  }

  /** Drops the spills unused for longer than the limit (the pool's sweeper calls it). */
  synchronized void dropIdle() {
    long limit = limits.idleMillis() * 1_000_000;
    long now = System.nanoTime();
    spills().stream().filter(spill -> now - spill.usedNanos > limit).forEach(spill -> drop(spill,
        "it was spilled and not used for " + limits.idleMillis() / 1000.0
        + " s (--resident-idle-seconds)"));
  }

  /**
   * Publishes a spill object of {@code owner}'s (holding one reference, which is the spill's
   * now) and the sessions of its handles; the handles of a session that ended meanwhile are
   * dropped at once.
   */
  synchronized Spill record(String owner, ObjectKey key, long size,
      Map<String, String> sessionsOfHandles) {
    Spill spill = new Spill(owner, key, size, sessionsOfHandles);
    Map<String, Spill> ofOwner = handles.computeIfAbsent(spill.owner, user -> new HashMap<>());
    // An older spill none of whose handles is left (spilled again since) goes with it.
    List<Spill> before = new ArrayList<>(ofOwner.values());
    for (String handle : spill.handles) {
      if (ended.contains(owner + " " + spill.sessions.get(handle))) {
        remember(owner, handle, SESSION_ENDED);
      } else {
        ofOwner.put(handle, spill);
        dropped.getOrDefault(spill.owner, new LinkedHashMap<>()).remove(handle);
      }
    }
    before.add(spill);
    releaseUnheld(ofOwner, before);
    if (ofOwner.containsValue(spill)) {
      Map<String, String> held = new LinkedHashMap<>();
      spill.handles.stream().filter(handle -> ofOwner.get(handle) == spill)
          .forEach(handle -> held.put(handle, spill.sessions.get(handle)));
      listener.spilled(spill.key, spill.size, held);
    }
    capBytes(spill.owner);
    return spill;
  }

  /**
   * A client session of {@code owner} ended: its handles go (a call given one is told why), and
   * each spill none of whose handles is left goes back to the store. Only that user's spills are
   * looked at: the same session id in another user's namespace names nothing here.
   *
   * @param sessionEnded the session ended: a spill recorded later (an executor that was
   *     spilling as the end arrived) drops its handles too. False: it released its values
   *     ({@code %bulletin --release}) and goes on, so what it keeps later stays
   * @return how many handles went
   */
  synchronized int dropSession(String owner, String session, boolean sessionEnded) {
    if (sessionEnded) {
      ended.add(owner + " " + session);
      while (ended.size() > ENDED_KEPT) {
        ended.remove(ended.iterator().next());
      }
    }
    Map<String, Spill> ofOwner = handles.getOrDefault(owner, new HashMap<>());
    List<Spill> touched = new ArrayList<>();
    for (Map.Entry<String, Spill> entry : List.copyOf(ofOwner.entrySet())) {
      if (session.equals(entry.getValue().sessions.get(entry.getKey()))) {
        ofOwner.remove(entry.getKey());
        touched.add(entry.getValue());
        remember(owner, entry.getKey(), SESSION_ENDED);
      }
    }
    releaseUnheld(ofOwner, touched);
    return touched.size(); // one entry per handle
  }

  /**
   * The values of the user's spill object {@code key} were restored on another worker (or
   * superseded there): its handles are forgotten here, remembered as gone {@code why}, and the
   * spill goes back to the store. Only {@code owner}'s spills are looked at.
   *
   * @return how many handles went
   */
  synchronized int forget(String owner, ObjectKey key, String why) {
    Map<String, Spill> ofOwner = handles.getOrDefault(owner, new HashMap<>());
    List<Spill> touched = new ArrayList<>();
    for (Map.Entry<String, Spill> entry : List.copyOf(ofOwner.entrySet())) {
      if (entry.getValue().key.equals(key)) {
        ofOwner.remove(entry.getKey());
        touched.add(entry.getValue());
        remember(owner, entry.getKey(), why);
      }
    }
    releaseUnheld(ofOwner, touched);
    return touched.size();
  }

  /** Each of these spills none of whose handles the user's map still holds goes to the store. */
  private void releaseUnheld(Map<String, Spill> ofOwner, List<Spill> candidates) {
    candidates.stream().distinct().filter(old -> !ofOwner.containsValue(old)).forEach(old -> {
      listener.gone(old.key);
      store.release(old.key);
      LOG.info(() -> "released the spill object " + old.key + " of " + old.owner
          + ": none of its resident values is kept any more");
    });
  }

  private void remember(String owner, String handle, String why) {
    LinkedHashMap<String, String> gone = dropped.computeIfAbsent(owner,
        user -> new LinkedHashMap<>());
    gone.put(handle, why);
    while (gone.size() > DROPPED_KEPT) {
      gone.remove(gone.keySet().iterator().next());
    }
  }

  /** The caps of {@link ResidentLimits}: the oldest spills go first. */
  private void capBytes(String owner) {
    long userCap = limits.userSpilledBytes();
    long hostCap = limits.hostSpilledBytes();
    List<Spill> all = spills();
    all.sort(Comparator.comparingLong(spill -> spill.usedNanos));
    long user = all.stream().filter(s -> s.owner.equals(owner)).mapToLong(s -> s.size).sum();
    long host = all.stream().mapToLong(s -> s.size).sum();
    for (Spill spill : all) {
      boolean overUser = userCap > 0 && user > userCap && spill.owner.equals(owner);
      if (overUser || hostCap > 0 && host > hostCap) {
        drop(spill, "spilled values past the " + (overUser
            ? "user's cap of " + Quantities.formatSize(userCap) + " (--spilled-user-bytes)"
            : "host's cap of " + Quantities.formatSize(hostCap) + " (--spilled-host-bytes)")
            + " were dropped, oldest first");
        host -= spill.size;
        user -= spill.owner.equals(owner) ? spill.size : 0;
      }
    }
  }

  private List<Spill> spills() {
    List<Spill> all = new ArrayList<>();
    handles.values().forEach(ofOwner -> ofOwner.values().stream().distinct()
        .filter(spill -> !all.contains(spill)).forEach(all::add));
    return all;
  }

  private void drop(Spill spill, String why) {
    Map<String, Spill> ofOwner = handles.getOrDefault(spill.owner, new HashMap<>());
    for (String handle : spill.handles) {
      if (ofOwner.remove(handle, spill)) {
        remember(spill.owner, handle, why);
      }
    }
    listener.gone(spill.key);
    store.release(spill.key);
    LOG.info(() -> "dropped " + spill.handles.size() + " spilled resident value(s) of "
        + spill.owner + ": " + why);
  }
}
