package dev.bulletin.worker.node;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.protocol.HeldObject;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * A worker node's objects as the runtime knows them: results it keeps for the runtime (one store
 * reference per time it reported one kept, dropped when the runtime says so), and what it told
 * the runtime its store holds, so an eviction can be reported (the runtime's locality hints).
 * Used on the node's event loop only.
 */
final class StoreReport {
  private final ObjectStore store;
  private final Map<ObjectKey, Integer> kept = new HashMap<>();
  private final Set<ObjectKey> reported = new HashSet<>();

  StoreReport(ObjectStore store) {
    this.store = store;
  }

  /** Keeps a result for the runtime: takes over the reference the call's outcome holds. */
  void keep(ObjectKey result) {
    kept.merge(result, 1, Integer::sum);
  }

  boolean keeps(ObjectKey key) {
    return kept.containsKey(key);
  }

  /** The runtime no longer needs a kept result: it stays cached, evictable, in the store. */
  void drop(ObjectKey key) {
    if (kept.containsKey(key)) {
      kept.computeIfPresent(key, (k, count) -> count == 1 ? null : count - 1);
      store.release(key);
    }
  }

  /** The results kept for the runtime, for a reattach to report. */
  List<HeldObject> keptObjects() {
    return held(List.copyOf(kept.keySet()));
  }

  /** What the store holds of these objects, to report with a call's end. */
  List<HeldObject> held(List<ObjectKey> keys) {
    List<HeldObject> held = new ArrayList<>(keys.size());
    for (ObjectKey key : keys) {
      try {
        var info = store.info(key);
        held.add(HeldObject.newBuilder().setNamespace(key.namespace()).setId(key.id().hex())
            .setSize(info.size()).setKind(info.kind()).build());
        reported.add(key);
      } catch (RuntimeException evicted) {
        // Not there (any more): nothing to report.
      }
    }
    return held;
  }

  /** Objects reported held that the store has evicted since; each is reported once. */
  List<HeldObject> evicted() {
    List<HeldObject> gone = new ArrayList<>();
    for (Iterator<ObjectKey> it = reported.iterator(); it.hasNext(); ) {
      ObjectKey key = it.next();
      if (!store.contains(key)) {
        it.remove();
        gone.add(HeldObject.newBuilder().setNamespace(key.namespace()).setId(key.id().hex())
            .build());
      }
    }
    return gone;
  }
}
