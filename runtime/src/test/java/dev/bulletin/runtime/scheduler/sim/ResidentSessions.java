package dev.bulletin.runtime.scheduler.sim;

import java.util.HashMap;
import java.util.Map;

/**
 * Notebook sessions that keep their GPU state between cells (issue 29; docs/notebooks.md, "State
 * that stays on the GPU between cells"), as the lab week models them. A session's state is
 * {@link #SESSION_BYTES}; it lives where the first call of the session's latest cell ran (a cell
 * runs in the session's executor; the other calls of a mapped cell are plain calls that keep
 * nothing). Between cells the GPU is free. What the scheduler is told depends on the
 * {@link Mode}: with {@link Mode#GPU} (the default) the first call of each later cell prefers the
 * worker that keeps the state ({@link SimCall#preferredWorker}, as the runtime sets
 * {@code TaskSpec.prefer_worker}, read by the scheduler's {@code RESIDENT} score) and carries its
 * session's key ({@link SimCall#residentSession}), and each worker's snapshot says which of its
 * GPUs keep whose state ({@link SimWorker#resident}): the {@code GpuPicker} gives the cell its
 * state's GPU when free and steers other calls off GPUs with state, and the
 * {@code STATE_SPARED} score prefers workers where a call spills nobody's state.
 * {@link Mode#WORKER} tells only the worker (the scheduler before the GPU preference);
 * {@link Mode#NONE} tells nothing.
 *
 * <p>Where that call lands decides what happens to the state:
 * <ul>
 *   <li>on the GPU that keeps it, no other call having started there since: a <b>hit</b>, 0 s;
 *   <li>elsewhere on the same worker: the state is restored there from the host,
 *       {@link #restoreSeconds()}, after its own spill if it was still on its old GPU;
 *   <li>on another worker: the same plus a copy between hosts ({@link #NETWORK_BYTES_PER_SECOND};
 *       the runtime does not do this yet, it reports the values lost: docs/notebooks.md).
 * </ul>
 * Any other call that starts on a GPU that keeps a session's state first spills it to the
 * worker's host memory ({@link #spillSeconds()}, as the agent spills before it ends the executor):
 * that call holds its GPU that much longer before its work begins. Restores are charged to the
 * session's cell the same way. A state stays until something spills it, also after its session
 * ended (the runtime does not yet free a session's values when its client ends). A call preempted
 * while it runs loses its executor and the state with it; its restart is charged a restore and
 * counted apart, not as a cell.
 */
final class ResidentSessions {
  /** What a notebook session keeps on its GPU: a model, its optimizer state, a batch. */
  static final long SESSION_BYTES = 2L << 30;
  /** Device to host (PCIe 4 x16 with pinned memory, about what torch measures). */
  static final double SPILL_BYTES_PER_SECOND = 12e9;
  /** Host to device. */
  static final double RESTORE_BYTES_PER_SECOND = 12e9;
  /** Host to host, for a restore on another worker: 100 Gb/s. */
  static final double NETWORK_BYTES_PER_SECOND = 12.5e9;

  /** What the scheduler is told of the sessions' state. */
  enum Mode {
    /** Nothing: the same state and costs, no preference ("no prefer"). */
    NONE,
    /** The worker that keeps the state only (the scheduler before the GPU preference). */
    WORKER,
    /** The worker, the session's key and which GPUs keep whose state. */
    GPU
  }

  /** One session's state: where it is, and whether it is on that GPU now. */
  static final class State {
    /** The session's key, as the scheduler sees it on calls and GPUs. */
    final String key;
    String worker;
    int gpu = -1;
    boolean onGpu;
    boolean inUse;

    State(String key) {
      this.key = key;
    }
  }

  final Mode mode;
  /** What each session keeps: {@link #SESSION_BYTES} unless a run says otherwise. */
  final long bytes;
  /** Next cells (a session's cells after its first), by where they found the state. */
  int hits;
  int restoredSameWorker;
  int restoredOtherWorker;
  /**
   * Of those restored on the same worker: the state was still on its GPU (free, as nothing else
   * started there) and the cell's call got another GPU of that worker: a GPU preference's gain.
   */
  int movedFromItsGpu;
  /** Of those restored on the same worker: another call had taken the GPU and spilled it. */
  int restoredAfterSpill;
  int restartsAfterPreemption;
  /** Spills that other calls made before they started, and the seconds they held GPUs for them. */
  int spillsByOthers;
  double spillSecondsOfOthers;
  /** Seconds the sessions' own calls held GPUs spilling and restoring their state. */
  double restoreSecondsOfCells;
  private final Map<String, State> onGpu = new HashMap<>();
  private final Map<String, SimWorker> workers = new HashMap<>();

  /**
   * {@code mode} {@link Mode#NONE}: the same state and costs, with no preference given to the
   * scheduler; {@code bytes} 0: the bookkeeping with nothing to move.
   */
  ResidentSessions(Mode mode, long bytes) {
    this.mode = mode;
    this.bytes = bytes;
  }

  /** The simulated workers, whose {@link SimWorker#resident} this keeps (in {@link Mode#GPU}). */
  void attach(java.util.List<SimWorker> cluster) {
    for (SimWorker worker : cluster) {
      workers.put(worker.id, worker);
    }
  }

  double spillSeconds() {
    return bytes / SPILL_BYTES_PER_SECOND;
  }

  double restoreSeconds() {
    return bytes / RESTORE_BYTES_PER_SECOND;
  }

  double networkSeconds() {
    return bytes / NETWORK_BYTES_PER_SECOND;
  }

  /** Marks {@code call} as the one its cell runs in the session's executor, before submitting. */
  void carry(SimCall call, State state) {
    call.state = state;
    if (mode != Mode.NONE && state.worker != null) {
      call.preferredWorker = state.worker;
    }
    if (mode == Mode.GPU) {
      call.residentSession = state.key;
    }
  }

  /** The driver's {@link BaseDriver.StartCost}: spills and restores before the call's work. */
  double started(SimCall call, String worker, int[] gpuIds) {
    State own = call.state instanceof State s ? s : null;
    double cost = 0;
    for (int gpu : gpuIds) {
      State there = onGpu.get(key(worker, gpu));
      if (there != null && there != own) {
        remove(worker, gpu);
        there.onGpu = false;
        spillsByOthers++;
        spillSecondsOfOthers += spillSeconds();
        cost += spillSeconds();
      }
    }
    if (own != null) {
      double restore = arrive(own, worker, gpuIds[0]);
      restoreSecondsOfCells += restore;
      cost += restore;
    }
    return cost;
  }

  private double arrive(State own, String worker, int gpu) {
    double cost = 0;
    boolean same = worker.equals(own.worker);
    if (own.inUse) {
      restartsAfterPreemption++;
      cost = restoreSeconds() + (same ? 0 : networkSeconds());
    } else if (own.worker != null) {
      if (own.onGpu && same && own.gpu == gpu) {
        hits++;
        remove(worker, gpu);
      } else {
        if (own.onGpu) {
          remove(own.worker, own.gpu);
          movedFromItsGpu += same ? 1 : 0;
          cost += spillSeconds();
        }
        cost += restoreSeconds() + (same ? 0 : networkSeconds());
        if (same) {
          restoredSameWorker++;
          restoredAfterSpill += own.onGpu ? 0 : 1;
        } else {
          restoredOtherWorker++;
        }
      }
    }
    own.worker = worker;
    own.gpu = gpu;
    own.onGpu = false;
    own.inUse = true;
    return cost;
  }

  /** The cell's call is done: the state stays on its GPU, which is free for others. */
  void finished(SimCall call) {
    if (call.state instanceof State own && own.inUse) {
      own.inUse = false;
      own.onGpu = true;
      onGpu.put(key(own.worker, own.gpu), own);
      if (mode == Mode.GPU) {
        SimWorker worker = workers.get(own.worker);
        worker.resident.put(own.gpu, own.key);
        worker.version++;
      }
    }
  }

  private void remove(String worker, int gpu) {
    onGpu.remove(key(worker, gpu));
    if (mode == Mode.GPU) {
      SimWorker simWorker = workers.get(worker);
      simWorker.resident.remove(gpu);
      simWorker.version++;
    }
  }

  int nextCells() {
    return hits + restoredSameWorker + restoredOtherWorker;
  }

  private static String key(String worker, int gpu) {
    return worker + "/" + gpu;
  }
}
