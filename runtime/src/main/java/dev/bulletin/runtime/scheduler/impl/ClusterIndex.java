package dev.bulletin.runtime.scheduler.impl;

import dev.bulletin.runtime.scheduler.ClusterCapacity;
import dev.bulletin.runtime.scheduler.Demand;
import dev.bulletin.runtime.scheduler.snapshot.RunningCall;
import dev.bulletin.runtime.scheduler.snapshot.WorkerState;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The pass's working copy of the workers' free capacity, indexed so a decision touches few
 * workers: usable workers (not draining) sit in buckets by free GPU count, and a call for g GPUs
 * looks in buckets g, g+1, ... (best fit first) instead of scanning the cluster. Worker order
 * inside a bucket is a seeded shuffle of the snapshot's order, so ties spread across workers the
 * same way for the same seed. Stages read it; only the pass changes it ({@link #take}).
 */
final class ClusterIndex {
  final WorkerState[] workers;
  final int size;
  final long[] freeMask;
  final int[] freeCount;
  final int[] gpuCount;
  final double[] freeCpus;
  final long[] freeMemory;
  final long[] expiresMillis;
  final boolean[] usable;
  final byte[][] distances;
  /**
   * Per worker and GPU, the eighths a fractional call could still take there: 8 on a free GPU,
   * 8 minus the running shares on a GPU only fractional calls hold, 0 on one held whole. A GPU
   * with any share taken is not in {@link #freeMask}, so no whole-GPU call lands on it.
   */
  final byte[][] shareFree;
  /**
   * Per worker, the GPUs a call is being preempted on (bit i = GPU i): they take no new share
   * until it has stopped, so the room its stop frees goes to the call it is stopped for, not to
   * a requeued preemptible share that would be preempted again.
   */
  final long[] reclaiming;
  /**
   * Per worker, the GPUs that keep a notebook session's state between its cells (bit i = GPU i;
   * from {@link WorkerState#residentGpus}); 0 on almost every worker, so the GPU choice and the
   * score pay for the state only where there is some. Not updated during the pass: a GPU with
   * state that a call takes is no longer free, and only free GPUs are compared.
   */
  final long[] stateMask;
  final Map<String, Integer> byId;
  /** The largest GPU count of any worker: buckets run 0..maxGpus. */
  final int maxGpus;
  /** The usable workers' whole capacities: what "could this ever fit" compares against. */
  final ClusterCapacity capacity;
  private final IntBag[] buckets;
  /** What the index was copied from: {@link #shareFree}'s rows are shared with it until written. */
  private final WorkerRows base;
  private final int[] bucketSlot;
  private final Map<String, int[]> holders = new HashMap<>();
  /** GPUs promised to older big calls from a later time (backfill); the pass adds them. */
  final Reservations reservations;

  /**
   * {@code running}'s fractional calls say how much of their shared GPUs is taken, and those
   * being preempted which GPUs free soon (the others may be left out);
   * {@code rows} are the snapshot's workers' ({@link WorkerRows#of}): the index copies what it
   * changes of them, never writes them.
   */
  ClusterIndex(WorkerRows rows, List<RunningCall> running) {
    size = rows.states.length;
    workers = rows.states;
    base = rows;
    freeMask = rows.freeMask.clone();
    freeCount = new int[size];
    gpuCount = rows.gpuCount;
    freeCpus = rows.freeCpus.clone();
    freeMemory = rows.freeMemory.clone();
    expiresMillis = rows.expiresMillis;
    usable = rows.usable;
    distances = rows.layout.distances;
    shareFree = rows.shareFree.clone();
    reclaiming = new long[size];
    stateMask = rows.stateMask;
    bucketSlot = new int[size];
    reservations = new Reservations(size);
    byId = rows.layout.byId;
    maxGpus = rows.layout.maxGpus;
    capacity = rows.capacity;
    shareRoom(running);
    buckets = new IntBag[maxGpus + 1];
    for (int f = 0; f <= maxGpus; f++) {
      buckets[f] = new IntBag();
    }
    for (int w = 0; w < size; w++) {
      freeCount[w] = Long.bitCount(freeMask[w]);
      if (usable[w]) {
        bucketSlot[w] = buckets[freeCount[w]].add(w);
      }
    }
  }

  /**
   * Updates {@link #shareFree} and {@link #reclaiming} from the running calls. A GPU a
   * fractional call holds is taken out of the free mask even if the snapshot listed it as free:
   * sharing and whole use of one GPU never mix.
   */
  private void shareRoom(List<RunningCall> running) {
    int[][] shared = null;
    for (RunningCall call : running) {
      if (!call.beingPreempted() && !call.fractional()) {
        continue;
      }
      Integer w = byId.get(call.workerId());
      if (w != null && call.beingPreempted()) {
        for (int id : call.gpuIds()) {
          reclaiming[w] |= id < gpuCount[w] ? 1L << id : 0;
        }
      }
      int gpu = call.fractional() ? call.gpuIds().get(0) : -1;
      if (w == null || gpu < 0 || gpu >= gpuCount[w]) {
        continue;
      }
      if (shared == null) {
        shared = new int[size][];
      }
      if (shared[w] == null) {
        shared[w] = new int[gpuCount[w]];
      }
      shared[w][gpu] += call.gpuEighths();
    }
    for (int w = 0; shared != null && w < size; w++) {
      for (int g = 0; shared[w] != null && g < gpuCount[w]; g++) {
        if (shared[w][g] > 0) {
          ownShareRow(w)[g] = (byte) Math.max(0, Demand.EIGHTHS - shared[w][g]);
          freeMask[w] &= ~(1L << g);
        }
      }
    }
  }

  /** Worker {@code w}'s row of {@link #shareFree}, this index's own to write. */
  private byte[] ownShareRow(int w) {
    if (shareFree[w] == base.shareFree[w]) {
      shareFree[w] = shareFree[w].clone();
    }
    return shareFree[w];
  }

  /** The most eighths a new fractional call could take on one GPU of worker {@code w}. */
  int mostShareFree(int w) {
    int most = 0;
    for (int g = 0; g < gpuCount[w]; g++) {
      if ((reclaiming[w] & (1L << g)) == 0) {
        most = Math.max(most, shareFree[w][g]);
      }
    }
    return most;
  }

  /** The GPUs of worker {@code w} that keep {@code session}'s state (none for ""). */
  long ownState(int w, String session) {
    if (stateMask[w] == 0 || session.isEmpty()) {
      return 0;
    }
    long mine = 0;
    for (Map.Entry<Integer, String> kept : workers[w].residentGpus().entrySet()) {
      if (kept.getValue().equals(session)) {
        mine |= 1L << kept.getKey();
      }
    }
    return mine;
  }

  /**
   * The index of the worker that keeps the call's values live, or -1 where holding the call to
   * it would hold it forever: the worker is not attached (its values went with it), or it could
   * not run the call even idle (the call then runs elsewhere and is told where they are).
   */
  int keeper(CallRow row) {
    Integer w = byId.get(row.call.preferredWorker());
    if (w == null) {
      return -1;
    }
    WorkerState worker = workers[w];
    boolean fits = row.fractional() ? gpuCount[w] >= 1 : gpuCount[w] >= row.gpus;
    return fits && worker.cpus() >= row.cpus - 1e-9 && worker.memoryBytes() >= row.memory ? w
        : -1;
  }

  /** Usable workers: the pass neither adds nor retires any. */
  int usableWorkers() {
    return capacity.workers();
  }

  /** Usable workers with exactly {@code free} GPUs free. */
  IntBag bucket(int free) {
    return buckets[free];
  }

  /** Most GPUs free on one usable worker; -1 if there is none. */
  int maxFree() {
    for (int f = maxGpus; f >= 0; f--) {
      if (buckets[f].size() > 0) {
        return f;
      }
    }
    return -1;
  }

  /** Takes GPUs, CPUs and memory of worker {@code w} for a placed call. */
  void take(int w, long gpus, double cpus, long memory) {
    if (usable[w]) {
      buckets[freeCount[w]].remove(bucketSlot[w], this);
    }
    freeMask[w] &= ~gpus;
    for (long m = gpus; m != 0; m &= m - 1) {
      ownShareRow(w)[Long.numberOfTrailingZeros(m)] = 0;
    }
    freeCount[w] = Long.bitCount(freeMask[w]);
    freeCpus[w] -= cpus;
    freeMemory[w] -= memory;
    if (usable[w]) {
      bucketSlot[w] = buckets[freeCount[w]].add(w);
    }
  }

  /** Takes {@code eighths} of GPU {@code gpu} of worker {@code w} for a placed fractional call. */
  void takeShare(int w, int gpu, int eighths, double cpus, long memory) {
    if (usable[w]) {
      buckets[freeCount[w]].remove(bucketSlot[w], this);
    }
    freeMask[w] &= ~(1L << gpu);
    ownShareRow(w)[gpu] = (byte) (shareFree[w][gpu] - eighths);
    freeCount[w] = Long.bitCount(freeMask[w]);
    freeCpus[w] -= cpus;
    freeMemory[w] -= memory;
    if (usable[w]) {
      bucketSlot[w] = buckets[freeCount[w]].add(w);
    }
  }

  void moved(int w, int slot) {
    bucketSlot[w] = slot;
  }

  /**
   * Workers whose store holds {@code objectId}: one scan of the workers per object a pass asks
   * about, cached for the pass (most passes ask about few objects; indexing every held object up
   * front would cost every pass).
   */
  int[] holders(String objectId) {
    int[] found = holders.get(objectId);
    if (found == null) {
      int count = 0;
      int[] scan = new int[size];
      for (int w = 0; w < size; w++) {
        if (workers[w].heldObjects().containsKey(objectId)) {
          scan[count++] = w;
        }
      }
      found = java.util.Arrays.copyOf(scan, count);
      holders.put(objectId, found);
    }
    return found;
  }

  /** An unordered set of worker indices with O(1) add and remove (swap with the last). */
  static final class IntBag {
    private int[] items = new int[4];
    private int size;

    int add(int item) {
      if (size == items.length) {
        items = java.util.Arrays.copyOf(items, size * 2);
      }
      items[size] = item;
      return size++;
    }

    void remove(int slot, ClusterIndex index) {
      size--;
      if (slot != size) {
        items[slot] = items[size];
        index.moved(items[slot], slot);
      }
    }

    int size() {
      return size;
    }

    int get(int i) {
      return items[i];
    }
  }
}
