package dev.bulletin.runtime.objects;

import dev.bulletin.runtime.workers.WorkerLink;
import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.bridge.ObjectStoreException;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.function.Function;

/**
 * Where the cluster's objects live: the runtime's store, and results kept in remote workers'
 * stores ("a result stays on its worker until someone needs it elsewhere"). The runtime's
 * references go through here: an object a worker kept has no file in the runtime's store, so its
 * references are counted here, and when the last one goes its workers are told to drop it.
 * Pulls it to the runtime's store on demand (a worker uploads it when asked over its Attach
 * stream). Also keeps, per worker, the objects it reported holding: hints for data locality.
 * Used on the control plane's event loop only.
 */
public final class ObjectDirectory {

  /** A result kept on workers; its references are counted here, not in the store. */
  private static final class Entry {
    final long size;
    final String kind;
    /** Workers that hold it for the runtime (a reference there, dropped when this entry goes). */
    final Set<String> keepers = new LinkedHashSet<>();
    int references;
    /** The runtime's store has a copy, held by one store reference of this entry. */
    boolean atHead;
    /** Why it is gone: every worker that kept it went away before it reached the runtime. */
    String lost;
    /** Restored after a restart: the worker that kept it, not reattached yet (or null). */
    String awaited;
    Promise<Void> pull;

    Entry(long size, String kind) {
      this.size = size;
      this.kind = kind;
    }
  }

  private final ObjectStore store;
  private final Function<String, Optional<WorkerLink>> links;
  private final Map<ObjectKey, Entry> entries = new HashMap<>();
  /** Per worker: objects it reported holding, id to size (the scheduler's locality hints). */
  private final Map<String, Map<String, Long>> hints = new HashMap<>();
  /**
   * Per worker, the stamp of its hints' last change ({@link #heldVersion}); stamps are never
   * reused, so a worker's hints dropped and reported again do not match a stale stamp.
   */
  private final Map<String, Long> hintStamps = new HashMap<>();
  private long lastHintStamp;
  /** Workers' own data ports: a kept object goes from its keeper to a reader directly. */
  private final DirectPorts direct = new DirectPorts();
  /** Where users' spilled resident values are; its spill objects are objects of this one. */
  private final ResidentDirectory residents;
  private int pulledObjects;
  private long pulledBytes;
  private long sentToWorkersBytes;
  private long dataPortBytes;

  /** @param links the link to a worker by id, while it is attached */
  public ObjectDirectory(ObjectStore store, Function<String, Optional<WorkerLink>> links) {
    this.store = store;
    this.links = links;
    this.residents = new ResidentDirectory(this, links);
  }

  /** The spilled resident values (issue 29) and where their spill objects are. */
  public ResidentDirectory residents() {
    return residents;
  }

  public ObjectStore store() {
    return store;
  }

  public DirectPorts direct() {
    return direct;
  }

  // ---- references --------------------------------------------------------------------------

  /**
   * Takes a reference if the object is present anywhere in the cluster; the answer to "has it?".
   * A lost object is not present.
   */
  boolean retainIfPresent(ObjectKey key) {
    Entry entry = entries.get(key);
    if (entry == null) {
      return store.retainIfPresent(key);
    }
    if (entry.lost != null) {
      return false;
    }
    entry.references++;
    return true;
  }

  /**
   * Takes a reference for a call that reads the object.
   *
   * @throws ObjectLostException if it lived only on workers that went away
   * @throws ObjectStoreException if it is nowhere
   */
  void retain(ObjectKey key, String what) {
    Entry entry = entries.get(key);
    if (entry != null && entry.lost != null) {
      throw new ObjectLostException(what + " object " + key.id() + " (an earlier call's result)"
          + " lived only on " + entry.lost);
    }
    if (!retainIfPresent(key)) {
      throw new ObjectStoreException(what + " object " + key.id() + " is not in this user's"
          + " store on the cluster; upload it (PutObject or AdoptObject) or send it inline");
    }
  }

  /**
   * Drops one reference. Objects with an entry count here first: a copy that also sits in the
   * store under references of its own (uploaded again by a client) keeps those, so the totals
   * balance whichever count a release lands on.
   */
  public void release(ObjectKey key) {
    Entry entry = entries.get(key);
    if (entry == null) {
      store.release(key);
      return;
    }
    if (--entry.references > 0) {
      return;
    }
    entries.remove(key);
    if (entry.atHead) {
      store.release(key);
    }
    for (String worker : entry.keepers) {
      links.apply(worker).ifPresent(link -> link.dropObjects(key.namespace(), List.of(key)));
    }
    if (entry.pull != null) {
      entry.pull.tryFail("object " + key.id() + " was released while it was being pulled");
    }
  }

  /** @throws ObjectStoreException if the object is nowhere */
  public long size(ObjectKey key) {
    Entry entry = entries.get(key);
    return entry != null ? entry.size : store.size(key);
  }

  // ---- kept results ------------------------------------------------------------------------

  /**
   * A worker kept a call's result in its store; takes one reference for the call's caller. If
   * the runtime's store already has those bytes (equal content), that copy serves and the worker
   * is told at once it need not keep its own.
   */
  public void kept(String workerId, ObjectKey key, long size, String kind) {
    held(workerId, key, size);
    Entry entry = entries.get(key);
    if (entry == null && store.retainIfPresent(key)) {
      links.apply(workerId).ifPresent(link -> link.dropObjects(key.namespace(), List.of(key)));
      return;
    }
    if (entry == null) {
      entry = new Entry(size, kind);
      entries.put(key, entry);
    }
    entry.references++;
    if (!entry.keepers.add(workerId)) {
      // Kept twice (equal results): the worker holds one reference per report.
      links.apply(workerId).ifPresent(link -> link.dropObjects(key.namespace(), List.of(key)));
    }
    entry.lost = null;
  }

  /** Where a result lives that only remote workers keep (the journal records it). */
  public record KeptResult(String workerId, long size, String kind) { }

  /** The result's first keeper, when only remote workers keep it (no copy in this store). */
  public Optional<KeptResult> keptOnly(ObjectKey key) {
    Entry entry = entries.get(key);
    if (entry == null || entry.atHead || entry.keepers.isEmpty()) {
      return Optional.empty();
    }
    return Optional.of(new KeptResult(entry.keepers.iterator().next(), entry.size, entry.kind));
  }

  /** Whether the object can be used on this worker without moving it (remote workers only). */
  public boolean keptOn(String workerId, ObjectKey key) {
    Entry entry = entries.get(key);
    return entry != null && entry.keepers.contains(workerId);
  }

  /**
   * The objects a call placed on {@code workerId} (null: the embedded worker, which reads the
   * runtime's store) needs in the runtime's store first: not those its worker keeps, nor those
   * it can fetch straight from their keeper ({@link #directSource}).
   */
  public List<ObjectKey> toMoveFor(String workerId, Collection<ObjectKey> keys) {
    List<ObjectKey> missing = new ArrayList<>();
    for (ObjectKey key : keys) {
      Entry entry = entries.get(key);
      if (entry != null && !entry.atHead
          && (workerId == null || !entry.keepers.contains(workerId))
          && (entry.lost != null || direct.keeperFor(entry.keepers, workerId) == null)) {
        missing.add(key);
      }
    }
    return missing;
  }

  /**
   * Where a call on worker {@code reader} fetches the object straight from the worker that keeps
   * it, with a fresh ticket: empty when the head's store has it, the reader keeps it itself, or
   * no keeper and reader serve data ports (then it comes through the head, see toMoveFor).
   */
  public Optional<dev.bulletin.protocol.DirectSource> directSource(ObjectKey key,
      String reader) {
    Entry entry = entries.get(key);
    if (entry == null || entry.atHead || entry.lost != null || entry.keepers.contains(reader)) {
      return Optional.empty();
    }
    return direct.ticket(direct.keeperFor(entry.keepers, reader), key, reader);
  }

  /**
   * For a client's OpenTransfer: a ticket for its session to fetch an object kept only on a
   * worker that serves its own port; empty when the head's store has it (or no keeper serves).
   */
  public Optional<dev.bulletin.protocol.DirectSource> directForClient(ObjectKey key,
      String session) {
    Entry entry = entries.get(key);
    if (entry == null || entry.atHead || entry.lost != null) {
      return Optional.empty();
    }
    return direct.ticket(direct.keeperFor(entry.keepers, null), key, session);
  }

  // ---- pulling to the runtime's store ------------------------------------------------------

  /** Completes once every object is in the runtime's store; fails if one is lost. */
  public Future<Void> toHead(Collection<ObjectKey> keys) {
    List<Future<Void>> pulls = new ArrayList<>(keys.size());
    keys.forEach(key -> pulls.add(toHead(key)));
    return Future.all(pulls).mapEmpty();
  }

  /**
   * Completes once the object is in the runtime's store (at once if it is, or it has no entry:
   * then the store answers for itself). A worker that kept it is asked to upload it; one pull per
   * object at a time.
   */
  public Future<Void> toHead(ObjectKey key) {
    Entry entry = entries.get(key);
    if (entry == null || entry.atHead) {
      return Future.succeededFuture();
    }
    if (entry.lost != null) {
      return Future.failedFuture(new ObjectLostException("object " + key.id()
          + " (an earlier call's result) lived only on " + entry.lost));
    }
    if (entry.pull != null) {
      return entry.pull.future();
    }
    if (store.retainIfPresent(key)) { // a client uploaded equal bytes meanwhile
      entry.atHead = true;
      return Future.succeededFuture();
    }
    for (String worker : entry.keepers) {
      Optional<WorkerLink> link = links.apply(worker);
      if (link.isPresent()) {
        entry.pull = Promise.promise();
        link.get().sendObject(key);
        return entry.pull.future();
      }
    }
    if (entry.awaited != null) { // asked for once its keeper reattaches (or fails then)
      entry.pull = Promise.promise();
      return entry.pull.future();
    }
    return Future.failedFuture(new ObjectLostException("object " + key.id()
        + " has no attached worker holding it"));
  }

  /**
   * A worker's PutObject committed: the store holds the object with one reference, which becomes
   * the entry's hold on its runtime copy (or is dropped when no pull waits for it).
   */
  public void arrived(ObjectKey key) {
    Entry entry = entries.get(key);
    if (entry == null || entry.atHead) {
      store.release(key);
      return;
    }
    entry.atHead = true;
    pulledObjects++;
    pulledBytes += entry.size;
    Promise<Void> pull = entry.pull;
    entry.pull = null;
    if (pull != null) {
      pull.tryComplete();
    }
  }

  /**
   * A worker could not send an object it was asked for: the pull fails with its reason. It stays
   * a keeper (the runtime's store may have been full, not the worker's copy gone), so a later
   * pull asks again and the last release still drops its hold.
   */
  public void unavailable(String workerId, ObjectKey key, String reason) {
    Entry entry = entries.get(key);
    if (entry == null || entry.pull == null || !entry.keepers.contains(workerId)) {
      return;
    }
    Promise<Void> pull = entry.pull;
    entry.pull = null;
    pull.tryFail(new ObjectStoreException("object " + key.id() + " could not be brought from"
        + " worker " + workerId + ": " + reason));
  }

  /**
   * A worker went away: what only it kept is lost; pulls from it fail.
   *
   * @param how what happened, read after "worker W, which": "lost its connection: ..."
   */
  public void workerLost(String workerId, String how) {
    residents.workerLost(workerId, how);
    hints.remove(workerId);
    hintStamps.remove(workerId);
    direct.detach(workerId);
    for (Map.Entry<ObjectKey, Entry> each : List.copyOf(entries.entrySet())) {
      Entry entry = each.getValue();
      if (entry.keepers.remove(workerId)) {
        afterKeeperLeft(each.getKey(), entry, "worker " + workerId + ", which " + how);
      }
    }
  }

  private void afterKeeperLeft(ObjectKey key, Entry entry, String where) {
    if (!entry.keepers.isEmpty() || entry.atHead) {
      if (entry.pull != null && !entry.keepers.isEmpty()) {
        // Ask the next keeper; the waiting promise stays the same.
        links.apply(entry.keepers.iterator().next()).ifPresent(link -> link.sendObject(key));
      }
      return;
    }
    entry.lost = where;
    if (entry.pull != null) {
      Promise<Void> pull = entry.pull;
      entry.pull = null;
      pull.tryFail(new ObjectLostException("object " + key.id()
          + " (an earlier call's result) lived only on " + where));
    }
  }

  // ---- after a restart: results kept on workers that have not reattached yet ----------------

  /**
   * The restore found {@code references} session holds on a result that lived only in
   * {@code workerId}'s store: they are held here again, and the result waits for that worker
   * to reattach with it ({@link #keeperReattached}) or not ({@link #keeperGone}). A fetch
   * meanwhile waits too.
   */
  public void awaitKeeper(ObjectKey key, String workerId, long size, String kind,
      int references) {
    Entry entry = entries.computeIfAbsent(key, k -> new Entry(size, kind));
    entry.references += references;
    entry.awaited = workerId;
  }

  /**
   * {@code workerId} reattached holding {@code held} in its store: what was awaited from it and
   * it still holds is kept there again (a waiting fetch asks it now, through {@code link}); what
   * it no longer holds is lost.
   */
  public void keeperReattached(String workerId, WorkerLink link, Set<ObjectKey> held) {
    for (Map.Entry<ObjectKey, Entry> each : List.copyOf(entries.entrySet())) {
      Entry entry = each.getValue();
      if (!workerId.equals(entry.awaited)) {
        continue;
      }
      entry.awaited = null;
      if (held.contains(each.getKey())) {
        entry.keepers.add(workerId);
        held(workerId, each.getKey(), entry.size);
        if (entry.pull != null) {
          link.sendObject(each.getKey());
        }
      } else {
        afterKeeperLeft(each.getKey(), entry, "worker " + workerId + ", which reattached"
            + " without it after the runtime restarted");
      }
    }
  }

  /**
   * {@code workerId} will not bring back what was awaited from it: that is lost.
   *
   * @param how read after "worker W, which": "did not reattach within 60 s ..."
   */
  public void keeperGone(String workerId, String how) {
    residents.workerLost(workerId, how);
    for (Map.Entry<ObjectKey, Entry> each : List.copyOf(entries.entrySet())) {
      Entry entry = each.getValue();
      if (workerId.equals(entry.awaited)) {
        entry.awaited = null;
        afterKeeperLeft(each.getKey(), entry, "worker " + workerId + ", which " + how);
      }
    }
  }

  // ---- locality hints ----------------------------------------------------------------------

  /** A worker reported holding an object in its store. */
  public void held(String workerId, ObjectKey key, long size) {
    Long before = hints.computeIfAbsent(workerId, id -> new HashMap<>())
        .put(key.id().hex(), size);
    if (before == null || before != size) {
      hintStamps.put(workerId, ++lastHintStamp);
    }
  }

  /** A worker reported it no longer holds an object (evicted from its store). */
  public void dropped(String workerId, ObjectKey key) {
    if (!keptOn(workerId, key)) {
      forget(workerId, key.id().hex());
    }
  }

  private void forget(String workerId, String id) {
    Map<String, Long> held = hints.get(workerId);
    if (held != null && held.remove(id) != null) {
      hintStamps.put(workerId, ++lastHintStamp);
    }
  }

  /**
   * Objects in a worker's store, id to size, as the scheduler's snapshot wants them. Ids without
   * their namespace: two users' equal ids only mislead a score, never a placement's correctness.
   */
  public Map<String, Long> heldBy(String workerId) {
    return hints.getOrDefault(workerId, Map.of());
  }

  /** Moves whenever {@link #heldBy} of the worker changes (0: it never reported any). */
  public long heldVersion(String workerId) {
    // Asked for every worker every pass; most runtimes have no hints, so skip hashing the id.
    return hintStamps.isEmpty() ? 0 : hintStamps.getOrDefault(workerId, 0L);
  }

  // ---- counters ------------------------------------------------------------------------------

  /** A worker fetched bytes from the runtime's store. */
  void sentToWorker(long bytes) {
    sentToWorkersBytes += bytes;
  }

  /** An object's bytes crossed the bulk data port, in either direction. */
  void movedOverDataPort(long bytes) {
    dataPortBytes += bytes;
  }

  public long dataPortBytes() {
    return dataPortBytes;
  }

  /** Results referenced and kept only on workers (not in the runtime's store). */
  public int workerObjects() {
    int count = 0;
    for (Entry entry : entries.values()) {
      if (!entry.atHead && entry.lost == null) {
        count++;
      }
    }
    return count;
  }

  /** Kept results a worker holds for the runtime now. */
  public int keptOn(String workerId) {
    int count = 0;
    for (Entry entry : entries.values()) {
      if (entry.keepers.contains(workerId)) {
        count++;
      }
    }
    return count;
  }

  public int pulledObjects() {
    return pulledObjects;
  }

  public long pulledBytes() {
    return pulledBytes;
  }

  public long sentToWorkersBytes() {
    return sentToWorkersBytes;
  }

  /** An object lived only on workers that went away (or could not send it). */
  public static final class ObjectLostException extends ObjectStoreException {
    public ObjectLostException(String message) {
      super(message);
    }
  }
}
