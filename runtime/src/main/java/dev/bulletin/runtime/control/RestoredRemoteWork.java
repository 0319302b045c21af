package dev.bulletin.runtime.control;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.runtime.api.TaskEvents;
import dev.bulletin.runtime.journal.JournalRecord.ResultKept;
import dev.bulletin.runtime.objects.TaskObjects;
import dev.bulletin.runtime.task.StopReason;
import dev.bulletin.runtime.task.Task;
import dev.bulletin.runtime.task.TaskState;
import dev.bulletin.runtime.workers.AttachedWorker;
import io.vertx.core.Context;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.logging.Logger;

/**
 * What a restored runtime awaits from remote workers (docs/durability.md, "Remote workers across
 * a restart"): the calls that were running on them when the runtime died, and the results that
 * sessions held and only their stores kept. The workers outlived the runtime, so such a call
 * is not run again: it waits, placed on its worker, for that worker to reattach within the
 * worker grace. A reattach that reports the call adopts it (its GPUs there are reserved again
 * and its outcome is reported as any call's); a reattach without it, a worker that registers
 * anew (it restarted), or the grace passing queues it again, one attempt later, as a call that
 * ran on the embedded worker. A held result waits likewise: a reattach with it keeps it there,
 * the rest marks it lost. Only the worker id the journal named can adopt a call: another worker
 * reporting it is told to stop it. Used on the control plane's event loop only.
 */
public final class RestoredRemoteWork {
  private static final Logger LOG = Logger.getLogger(RestoredRemoteWork.class.getName());

  private final ControlPlane plane;
  private final Context context;
  /** By worker id: its restored calls not adopted yet, by task id. */
  private final Map<String, Map<String, Task>> waiting = new LinkedHashMap<>();
  /** Workers whose kept results sessions hold, awaited after the restore. */
  private final Set<String> keepers = new HashSet<>();
  private boolean reattachWindow;
  private final Map<String, Long> graceTimers = new HashMap<>();
  /** Set for the worker grace after a restore that brought calls back (see below). */

  RestoredRemoteWork(ControlPlane plane, Context context) {
    this.plane = plane;
    this.context = context;
  }

  /** A restored call that was running on remote worker {@code workerId}: it waits for it. */
  void await(Task task, String workerId) {
    task.placedOn(workerId, List.of(), System.nanoTime());
    plane.tasks().transitionQuietly(task, TaskState.PLACED); // out of the queue, not run again
    waiting.computeIfAbsent(workerId, id -> new LinkedHashMap<>()).put(task.id(), task);
  }

  /** A restored session hold on a result that only {@code kept.workerId()} kept. */
  void awaitResult(ObjectKey key, ResultKept kept, int references) {
    plane.objects().awaitKeeper(key, kept.workerId(), kept.size(), kept.kind(), references);
    keepers.add(kept.workerId());
  }

  /**
   * A spill of resident values the journal names on remote worker {@code workerId}: its object
   * is awaited from that worker as a kept result is (the directory's one hold), and lost if it
   * does not reattach with it.
   */
  void awaitSpill(ObjectKey key, String workerId, long size, String kind) {
    plane.objects().awaitKeeper(key, workerId, size, kind, 1);
    keepers.add(workerId);
  }

  /**
   * After the restore: each worker has {@code grace} from now to reattach; the calls of one
   * that does not are requeued. If sessions were restored, for that long a call submitted that
   * no attached worker could run is accepted and waits: its clients are back before the
   * workers that ran their calls may be (see {@code Passes#refuse}).
   */
  void startGrace(Duration grace, boolean restoredSessions) {
    if (restoredSessions && !grace.isZero()) {
      reattachWindow = true;
      context.owner().setTimer(grace.toMillis(), id -> {
        reattachWindow = false;
        plane.schedule(); // calls that waited for a worker that did not come back fail now
      });
    }
    Set<String> awaited = new LinkedHashSet<>(waiting.keySet());
    awaited.addAll(keepers);
    for (String workerId : awaited) {
      graceTimers.put(workerId, context.owner().setTimer(Math.max(1, grace.toMillis()),
          id -> {
            graceTimers.remove(workerId);
            String why = "did not reattach within " + grace.toSeconds()
                + " s (--worker-grace) of the restart";
            keeperGone(workerId, why);
            requeueAll(workerId, why);
          }));
    }
  }

  private void keeperGone(String workerId, String why) {
    if (keepers.remove(workerId)) {
      plane.objects().keeperGone(workerId, why);
    }
  }

  /** Whether remote workers may still reattach after a restart (see {@link #startGrace}). */
  public boolean workersMayReattach() {
    return reattachWindow;
  }

  /** Calls waiting for their worker now (the status and the tests). */
  public int waitingCount() {
    return waiting.values().stream().mapToInt(Map::size).sum();
  }

  /**
   * A worker registered. On a reattach it reported the calls it runs ({@code running}: with the
   * GPUs each holds) and those it ended without the runtime journaling their end ({@code
   * reported}, a superset of {@code running}'s keys): the calls the journal had on this worker
   * id that it reports are adopted, the others queued again; the results awaited from it are
   * kept there if {@code held} (what its store holds for the runtime) has them, lost otherwise.
   * Registering anew (not a reattach: the worker restarted) loses them all.
   *
   * @return the reported calls the worker must stop: none of this runtime's calls on it
   */
  public List<String> registered(AttachedWorker worker, boolean reattach,
      Map<String, List<Integer>> running, Set<String> reported,
      Set<ObjectKey> held) {
    Long timer = graceTimers.remove(worker.id());
    if (timer != null) {
      context.owner().cancelTimer(timer);
    }
    if (!reattach) {
      String why = "registered anew (it restarted)";
      keeperGone(worker.id(), why);
      requeueAll(worker.id(), why + ": the calls it ran are lost");
      return List.copyOf(reported);
    }
    if (keepers.remove(worker.id())) {
      plane.objects().keeperReattached(worker.id(), worker.link(), held);
    }
    Map<String, Task> mine = waiting.remove(worker.id());
    List<String> stop = new ArrayList<>();
    int adopted = 0;
    for (String taskId : reported) {
      Task task = mine == null ? null : mine.remove(taskId);
      if (task == null) {
        stop.add(taskId); // not this runtime's call on this worker (or it was given up)
        continue;
      }
      try {
        plane.adopt(task, worker, running.get(taskId));
        adopted++;
      } catch (IllegalStateException | IllegalArgumentException badSlots) {
        stop.add(taskId);
        requeue(task, worker.id(), "reported it on GPUs " + running.get(taskId)
            + " that it cannot hold (" + badSlots.getMessage() + ")");
      }
    }
    if (mine != null) {
      for (Task task : mine.values()) {
        requeue(task, worker.id(), "reattached without it (it no longer runs it)");
      }
    }
    if (adopted > 0 || mine != null) {
      int kept = adopted;
      LOG.info(() -> "worker " + worker.id() + " reattached after the restart: " + kept
          + " of its restored calls adopted");
    }
    plane.schedule();
    return stop;
  }

  /**
   * Cancels a call that waits for its worker (its caller cancelled it, or its session ended):
   * it ends here, and its worker is told to stop it when it reattaches.
   *
   * @return false if the call does not wait here
   */
  boolean cancel(Task task, StopReason reason) {
    Map<String, Task> mine = task.workerId() == null ? null : waiting.get(task.workerId());
    if (mine == null || mine.remove(task.id()) == null) {
      return false;
    }
    if (mine.isEmpty()) {
      forget(task.workerId());
    }
    TaskObjects.release(plane.objects(), task);
    plane.tasks().transition(task, TaskState.CANCELLED, TaskEvents.cancelled(task.id(),
        "the call was " + reason.describe() + " while its worker " + task.workerId()
            + " was away (the runtime restarted)"));
    return true;
  }

  private void requeueAll(String workerId, String why) {
    Map<String, Task> mine = waiting.remove(workerId);
    if (mine == null) {
      return;
    }
    forget(workerId);
    mine.values().forEach(task -> requeue(task, workerId, why));
    plane.schedule();
  }

  /** Nothing more awaited from the worker's calls; its results may still be. */
  private void forget(String workerId) {
    waiting.remove(workerId);
    Long timer = keepers.contains(workerId) ? null : graceTimers.remove(workerId);
    if (timer != null) {
      context.owner().cancelTimer(timer);
    }
  }

  /** Its run is lost: queued again, one attempt later, using no retry (as a restart does). */
  private void requeue(Task task, String workerId, String why) {
    LOG.info(() -> "call " + task.id() + " (" + task.name() + " of " + task.owner().user()
        + ") was running on worker " + workerId + " when the runtime restarted; the worker "
        + why + ": it runs again (attempt " + (task.attempts() + 1) + ")");
    task.undelivered();
    plane.tasks().transition(task, TaskState.QUEUED, TaskEvents.queued(task.id()));
  }
}
