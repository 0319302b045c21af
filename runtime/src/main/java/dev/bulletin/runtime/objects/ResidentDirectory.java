package dev.bulletin.runtime.objects;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.runtime.workers.WorkerLink;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.function.Function;

/**
 * Where the cluster's spilled resident values are (issue 29, docs/notebooks.md): by user
 * namespace, then handle id, the spill object that holds the value and the worker whose agent
 * made it. The agents announce their spills and say when one goes; the runtime uses this to
 * restore a value on whichever worker the user's next call lands on.
 *
 * <p>A spill object moves as any object of the cluster does: one in a remote worker's store is
 * a kept object of the {@link ObjectDirectory} (that worker holds it until the runtime drops
 * it), one of the embedded worker lives in the runtime's store. Either way this directory holds
 * one reference on it while it names it, and a call that restores it holds one more while it is
 * placed; the data path brings it to the call's host as one of the call's inputs.
 *
 * <p>A handle id is only ever looked up in the namespace of the call that names it: one user's
 * ids never resolve another user's spill. Used on the control plane's event loop only.
 */
public final class ResidentDirectory {

  /** Reasons remembered per user for handles the runtime saw go (the oldest are forgotten). */
  static final int LOST_KEPT = 1024;

  /** Told of each spill the directory takes and lets go: the journal records them. */
  public interface Listener {
    void taken(ResidentSpill spill);

    void released(String workerId, ObjectKey key);

    Listener NONE = new Listener() {
      @Override
      public void taken(ResidentSpill spill) { }

      @Override
      public void released(String workerId, ObjectKey key) { }
    };
  }

  /** A call's restores for one placement: what it reads from spills elsewhere, and why not. */
  public record ForCall(Map<String, ObjectKey> restore, Map<String, String> lost) {
    public static final ForCall NONE = new ForCall(Map.of(), Map.of());
  }

  private final ObjectDirectory objects;
  private final Function<String, Optional<WorkerLink>> links;
  /** By namespace: handle id to the spill that holds it. */
  private final Map<String, Map<String, ResidentSpill>> byHandle = new HashMap<>();
  /** By worker and key ("worker key"): every spill named here. */
  private final Map<String, ResidentSpill> spills = new LinkedHashMap<>();
  /** A handle restored on a worker (live on its GPU there, not spilled), and its session. */
  private record Live(String workerId, String session) { }

  /** By namespace: handle id to where it was restored since its last spill. */
  private final Map<String, Map<String, Live>> restoredOn = new HashMap<>();
  /** By namespace: handle id to why the runtime saw it go. */
  private final Map<String, LinkedHashMap<String, String>> lost = new HashMap<>();
  private Listener listener = Listener.NONE;

  ResidentDirectory(ObjectDirectory objects, Function<String, Optional<WorkerLink>> links) {
    this.objects = objects;
    this.links = links;
  }

  public void listen(Listener listener) {
    this.listener = listener == null ? Listener.NONE : listener;
  }

  // ---- what the agents say -----------------------------------------------------------------

  /**
   * Worker {@code workerId}'s agent spilled the handles into {@code key}: held in its own store
   * for the runtime ({@code inWorkerStore}: a remote worker, which keeps it until the runtime
   * drops it), else in the runtime's store (the embedded worker). A handle another spill named
   * is superseded: that spill goes when none of its handles is left, and its worker forgets it.
   *
   * @return false if the object is gone already (an embedded spill dropped as it was announced)
   */
  public boolean spilled(String workerId, boolean inWorkerStore, ObjectKey key, long size,
      String kind, Map<String, String> handles) {
    String id = id(workerId, key);
    if (spills.containsKey(id)) {
      return true; // told again: it holds what it held
    }
    if (inWorkerStore) {
      objects.kept(workerId, key, size, kind);
    } else if (!objects.retainIfPresent(key)) {
      return false;
    }
    name(new ResidentSpill(workerId, key, size, kind, handles), true);
    return true;
  }

  /**
   * After a restart of the runtime: a spill its journal names, whose hold the restore took (the
   * object awaited from its remote worker, or held in the runtime's store).
   *
   * @param agentGone its agent died with the runtime (the embedded worker): the runtime's
   *     store serves it to a call on any worker
   */
  public void restored(String workerId, boolean agentGone, ObjectKey key, long size,
      String kind, Map<String, String> handles) {
    if (spills.containsKey(id(workerId, key))) {
      objects.release(key); // named twice: one hold is enough
      return;
    }
    ResidentSpill spill = new ResidentSpill(workerId, key, size, kind, handles);
    spill.agentGone = agentGone;
    name(spill, false);
  }

  /** Names a held spill for its handles; {@code tell}: another worker's older copy forgets. */
  private void name(ResidentSpill spill, boolean tell) {
    String workerId = spill.workerId;
    ObjectKey key = spill.key;
    spills.put(id(workerId, key), spill);
    Map<String, ResidentSpill> ofNamespace = byHandle.computeIfAbsent(key.namespace(),
        namespace -> new HashMap<>());
    List<ResidentSpill> superseded = new ArrayList<>();
    for (String handle : spill.handles.keySet()) {
      ResidentSpill before = ofNamespace.put(handle, spill);
      if (before != null && before != spill) {
        before.handles.remove(handle);
        superseded.add(before);
      }
      LinkedHashMap<String, String> gone = lost.get(key.namespace());
      if (gone != null) {
        gone.remove(handle);
      }
      forgetLive(key.namespace(), handle);
    }
    listener.taken(spill);
    for (ResidentSpill old : superseded) {
      if (old.handles.isEmpty()) {
        // Its own agent lets go of what it superseded; another worker is told.
        release(old, !tell || old.workerId.equals(workerId) ? null
            : "worker " + workerId + " spilled them again since");
      }
    }
  }

  /** The worker no longer holds that spill for its values: the directory lets it go. */
  public void gone(String workerId, ObjectKey key) {
    ResidentSpill spill = spills.get(id(workerId, key));
    if (spill != null) {
      unname(spill);
      release(spill, null);
    }
  }

  // ---- calls -------------------------------------------------------------------------------

  /**
   * For a call of {@code namespace} placed on {@code workerId} that names these handles: each
   * handle spilled by another worker, to its spill object (held for the call until
   * {@link #placementEnded}), and why the runtime knows a handle to be gone. Handles are looked
   * up in {@code namespace} only.
   *
   * @param preferred the worker the client said keeps the values ("" when none)
   */
  public ForCall forCall(String namespace, Collection<String> handles, String workerId,
      String preferred) {
    if (handles.isEmpty()) {
      return ForCall.NONE;
    }
    Map<String, ResidentSpill> ofNamespace = byHandle.getOrDefault(namespace, Map.of());
    Map<String, String> gone = lost.getOrDefault(namespace, new LinkedHashMap<>());
    Map<String, ObjectKey> restore = new HashMap<>();
    Map<String, String> why = new HashMap<>();
    Set<ObjectKey> held = new LinkedHashSet<>();
    for (String handle : handles) {
      ResidentSpill spill = ofNamespace.get(handle);
      if (spill != null && (spill.agentGone || !spill.workerId.equals(workerId))) {
        restore.put(handle, spill.key);
        held.add(spill.key);
      } else if (spill == null && gone.containsKey(handle)) {
        why.put(handle, gone.get(handle));
      } else if (spill == null) {
        Live live = restoredOn.getOrDefault(namespace, Map.of()).get(handle);
        String keeper = live != null ? live.workerId() : preferred;
        if (!keeper.isEmpty() && !keeper.equals(workerId)) {
          why.put(handle, "it is kept on a GPU of worker " + keeper + " (not spilled), and"
              + " this call ran on worker " + workerId + "; a value on a GPU does not move to"
              + " another host until it is spilled there");
        }
      }
    }
    for (ObjectKey key : held) {
      if (!objects.retainIfPresent(key)) { // lost meanwhile: not restored, said so
        restore.entrySet().removeIf(entry -> {
          boolean missing = entry.getValue().equals(key);
          if (missing) {
            why.put(entry.getKey(), "its spill object " + key.id() + " is not on the cluster"
                + " any more");
          }
          return missing;
        });
      }
    }
    return restore.isEmpty() && why.isEmpty() ? ForCall.NONE : new ForCall(restore, why);
  }

  /** A placement that restored these spills ended: the call's holds on them go. */
  public void placementEnded(ForCall call) {
    new LinkedHashSet<>(call.restore().values()).forEach(objects::release);
  }

  /**
   * A call of {@code namespace} started on {@code workerId} with these spills of other workers:
   * their values live there now (a restore loads every handle of its spill), so each spill's
   * worker forgets it (a stale copy is never restored there) and the directory lets it go.
   */
  public void restoredOn(String namespace, Collection<ObjectKey> keys, String workerId,
      String taskId) {
    Map<String, ResidentSpill> ofNamespace = byHandle.getOrDefault(namespace, Map.of());
    Set<ResidentSpill> moved = new LinkedHashSet<>();
    for (ObjectKey key : keys) {
      ofNamespace.values().stream().filter(spill -> spill.key.equals(key)
          && (spill.agentGone || !spill.workerId.equals(workerId))).forEach(moved::add);
    }
    for (ResidentSpill spill : moved) {
      Map<String, Live> live = restoredOn.computeIfAbsent(namespace, user -> new HashMap<>());
      spill.handles.forEach((handle, session) -> live.put(handle, new Live(workerId, session)));
      unname(spill);
      release(spill, "they were restored on worker " + workerId + " (call " + taskId + ")");
    }
  }

  /** A worker went away: its spills are lost with its store, and what was restored there. */
  void workerLost(String workerId, String how) {
    restoredOn.forEach((namespace, live) -> live.entrySet().removeIf(entry -> {
      if (entry.getValue().workerId().equals(workerId)) {
        remember(namespace, entry.getKey(), "it was on a GPU of worker " + workerId
            + ", which " + how);
        return true;
      }
      return false;
    }));
    for (ResidentSpill spill : List.copyOf(spills.values())) {
      if (spill.workerId.equals(workerId)) {
        String why = "it was spilled on worker " + workerId + ", which " + how;
        spill.handles.keySet().forEach(handle -> remember(spill.key.namespace(), handle, why));
        unname(spill);
        release(spill, null);
      }
    }
  }

  /**
   * A client session of {@code namespace} ended: its handles go from the directory (the
   * workers drop them too, told by the runtime), and a spill none of whose handles is left.
   */
  public void sessionEnded(String namespace, String session, String why) {
    Map<String, ResidentSpill> ofNamespace = byHandle.getOrDefault(namespace, new HashMap<>());
    Set<ResidentSpill> touched = new LinkedHashSet<>();
    for (Map.Entry<String, ResidentSpill> entry : List.copyOf(ofNamespace.entrySet())) {
      if (session.equals(entry.getValue().handles.get(entry.getKey()))) {
        ofNamespace.remove(entry.getKey());
        entry.getValue().handles.remove(entry.getKey());
        touched.add(entry.getValue());
        remember(namespace, entry.getKey(), why);
      }
    }
    touched.stream().filter(spill -> spill.handles.isEmpty()).forEach(spill -> release(spill,
        null));
    restoredOn.getOrDefault(namespace, new HashMap<>()).entrySet().removeIf(entry -> {
      boolean ended = entry.getValue().session().equals(session);
      if (ended) {
        remember(namespace, entry.getKey(), why);
      }
      return ended;
    });
  }

  /**
   * The worker that keeps the first of these handles the directory knows of (spilled there,
   * or restored there since), else {@code preferred}: where a call reading them would rather
   * run. Only {@code namespace}'s handles are looked at.
   */
  public String preferredFor(String namespace, Collection<String> handles, String preferred) {
    for (String handle : handles) {
      Live live = restoredOn.getOrDefault(namespace, Map.of()).get(handle);
      if (live != null) {
        return live.workerId();
      }
      ResidentSpill spill = byHandle.getOrDefault(namespace, Map.of()).get(handle);
      if (spill != null) {
        return spill.workerId;
      }
    }
    return preferred;
  }

  /**
   * The worker where one of these handles was restored since its last spill (live on a GPU
   * there), or "". A call reading it can read it only there.
   */
  public String restoredLiveOn(String namespace, Collection<String> handles) {
    Map<String, Live> restored = restoredOn.getOrDefault(namespace, Map.of());
    for (String handle : handles) {
      Live live = restored.get(handle);
      if (live != null) {
        return live.workerId();
      }
    }
    return "";
  }

  /**
   * Whether one of these handles is unknown here: never spilled, restored or seen to go. Such
   * a value, if it is this namespace's at all, is still in the executor of the call that made
   * it, on the worker the client's handle names.
   */
  public boolean neverSpilled(String namespace, Collection<String> handles) {
    Map<String, Live> restored = restoredOn.getOrDefault(namespace, Map.of());
    Map<String, ResidentSpill> spilled = byHandle.getOrDefault(namespace, Map.of());
    Map<String, String> gone = lost.getOrDefault(namespace, new LinkedHashMap<>());
    for (String handle : handles) {
      if (!restored.containsKey(handle) && !spilled.containsKey(handle)
          && !gone.containsKey(handle)) {
        return true;
      }
    }
    return false;
  }

  private void forgetLive(String namespace, String handle) {
    Map<String, Live> live = restoredOn.get(namespace);
    if (live != null && live.remove(handle) != null && live.isEmpty()) {
      restoredOn.remove(namespace);
    }
  }

  // ---- reading -----------------------------------------------------------------------------

  /** The spill that holds a handle of {@code namespace}'s, if the directory knows one. */
  public Optional<ResidentSpill> spillOf(String namespace, String handle) {
    return Optional.ofNullable(byHandle.getOrDefault(namespace, Map.of()).get(handle));
  }

  /** Why a handle of {@code namespace}'s went, if the runtime saw it go. */
  public Optional<String> lostWhy(String namespace, String handle) {
    return Optional.ofNullable(lost.getOrDefault(namespace, new LinkedHashMap<>()).get(handle));
  }

  /** Every spill named here, for the journal's snapshot. */
  public List<ResidentSpill> spills() {
    return List.copyOf(spills.values());
  }

  // ---- internals ---------------------------------------------------------------------------

  private static String id(String workerId, ObjectKey key) {
    return workerId + " " + key;
  }

  /** The spill's handles no longer name it (those another spill took since stay there). */
  private void unname(ResidentSpill spill) {
    Map<String, ResidentSpill> ofNamespace = byHandle.get(spill.key.namespace());
    if (ofNamespace != null) {
      spill.handles.keySet().forEach(handle -> ofNamespace.remove(handle, spill));
      if (ofNamespace.isEmpty()) {
        byHandle.remove(spill.key.namespace());
      }
    }
    spill.handles.clear();
  }

  /**
   * Lets a spill go: the directory's reference on its object, and with {@code forget} (why),
   * the worker's hold on its values.
   */
  private void release(ResidentSpill spill, String forget) {
    if (spills.remove(id(spill.workerId, spill.key)) == null) {
      return;
    }
    listener.released(spill.workerId, spill.key);
    if (forget != null) {
      links.apply(spill.workerId).ifPresent(link -> link.forgetSpill(spill.key, forget));
    }
    objects.release(spill.key);
  }

  private void remember(String namespace, String handle, String why) {
    LinkedHashMap<String, String> gone = lost.computeIfAbsent(namespace,
        user -> new LinkedHashMap<>());
    gone.put(handle, Objects.requireNonNull(why));
    while (gone.size() > LOST_KEPT) {
      gone.remove(gone.keySet().iterator().next());
    }
  }
}
