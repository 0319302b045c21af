package dev.bulletin.runtime.control;

import com.google.protobuf.InvalidProtocolBufferException;
import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.protocol.FailureCode;
import dev.bulletin.protocol.RuntimeTimings;
import dev.bulletin.protocol.TaskEvent;
import dev.bulletin.runtime.api.ClientSession;
import dev.bulletin.runtime.api.SessionRegistry;
import dev.bulletin.runtime.api.TaskEvents;
import dev.bulletin.runtime.identity.Identity;
import dev.bulletin.runtime.journal.JournalRecord;
import dev.bulletin.runtime.journal.JournalRecord.CallAccepted;
import dev.bulletin.runtime.journal.JournalRecord.SessionOpened;
import dev.bulletin.runtime.journal.JournalState;
import dev.bulletin.runtime.scheduler.Demand;
import dev.bulletin.runtime.task.Task;
import dev.bulletin.runtime.task.TaskState;
import dev.bulletin.runtime.workers.AttachedWorker;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.logging.Logger;

/**
 * A restart: the state the journal adds up to goes back into a new control plane before it
 * serves (docs/durability.md). The ledger and credits are taken as they were; each open
 * session is recreated detached, holding what it held, for its client to resume; each call
 * not ended is queued again under its session, with the objects it holds (a call that was
 * running on the embedded worker died with the runtime: it runs again, one attempt later). The
 * store kept its files across the restart: every object the journal names is kept, one whose
 * file is gone makes what needed it fail as lost, and files nothing names are deleted.
 */
public final class JournalRestore {
  private static final Logger LOG = Logger.getLogger(JournalRestore.class.getName());

  /** What the restore found, for the log and the tests. */
  public record Report(int sessions, int calls, int lostCalls, int missingObjects,
      int droppedFiles) { }

  private final ControlPlane plane;
  private final SessionRegistry sessions;
  private final ObjectStore store;
  /** How long a call restored as running on a remote worker waits for it to reattach. */
  private final Duration workerGrace;
  /** The embedded worker's id: its calls died with the runtime, whenever it attaches. */
  private final String embeddedWorkerId;
  private int missingObjects;

  private JournalRestore(ControlPlane plane, SessionRegistry sessions, Duration workerGrace,
      String embeddedWorkerId) {
    this.plane = plane;
    this.sessions = sessions;
    this.store = plane.store();
    this.workerGrace = workerGrace;
    this.embeddedWorkerId = embeddedWorkerId;
  }

  /** Restores {@code state} into {@code plane}, which must be new (nothing submitted yet). */
  public static Report restore(JournalState state, ControlPlane plane, SessionRegistry sessions) {
    return restore(state, plane, sessions, Duration.ZERO, "");
  }

  /**
   * As {@link #restore(JournalState, ControlPlane, SessionRegistry)}; a call that was running
   * on a remote worker (any but {@code embeddedWorkerId}) waits up to {@code workerGrace} for
   * that worker to reattach and report it ({@link RestoredRemoteWork}) instead of running
   * again (zero: it runs again at once).
   */
  public static Report restore(JournalState state, ControlPlane plane, SessionRegistry sessions,
      Duration workerGrace, String embeddedWorkerId) {
    return new JournalRestore(plane, sessions, workerGrace, embeddedWorkerId).run(state);
  }

  private Report run(JournalState state) {
    long started = System.nanoTime();
    Journaling journaling = plane.journaling();
    journaling.restoring(true);
    List<Runnable> after = new ArrayList<>();
    int restoredCalls = 0;
    int lostCalls = 0;
    try {
      plane.policy().ledger().restore(state.ledger());
      for (JournalState.Session saved : state.sessions()) {
        ClientSession session = restoreSession(saved, journaling, state.keptResults());
        // Ended calls' results and failures: the client hears them again (a duplicate of an
        // end it saw already is ignored by the client).
        for (byte[] bytes : saved.endedCalls().values()) {
          TaskEvent event = parse(bytes);
          if (event != null) {
            after.add(() -> session.send(event));
          }
        }
      }
      restoreSpills(state);
      for (JournalState.Call call : state.calls()) {
        ClientSession session = sessions.find(call.accepted().sessionId()).orElse(null);
        if (session == null) {
          continue; // its session ended before the crash: the call was stopped with it
        }
        Task task = restoreCall(call, session);
        restoredCalls++;
        if (task.state() == TaskState.ERROR) {
          lostCalls++;
        }
      }
    } finally {
      journaling.restoring(false);
    }
    after.forEach(Runnable::run);
    plane.restoredRemoteWork().startGrace(workerGrace, !state.sessions().isEmpty());
    int dropped = store.dropUnreferencedObjects();
    Report report = new Report(state.sessions().size(), restoredCalls, lostCalls,
        missingObjects, dropped);
    if (report.sessions() > 0 || dropped > 0) {
      LOG.info("restored from the journal: " + report.sessions() + " sessions (detached until"
          + " their clients resume them), " + restoredCalls + " calls not ended (" + lostCalls
          + " failed: an object they need is gone), " + missingObjects + " objects missing from"
          + " the store, " + dropped + " store files no session or call names deleted, "
          + plane.restoredRemoteWork().waitingCount() + " calls waiting up to "
          + workerGrace.toSeconds() + " s for the remote worker that ran them, in "
          + (System.nanoTime() - started) / 1_000_000 + " ms");
    }
    plane.schedule();
    return report;
  }

  private ClientSession restoreSession(JournalState.Session saved, Journaling journaling,
      Map<String, JournalRecord.ResultKept> keptOnWorkers) {
    SessionOpened opened = saved.opened();
    Identity identity = new Identity(opened.user(), opened.group(), opened.owner(), false,
        opened.admin());
    ClientSession session = sessions.restoreDetached(opened.sessionId(), identity,
        saved.reservedSeq());
    journaling.restoredSession(opened.sessionId(), saved.reservedSeq());
    saved.holds().forEach((name, count) -> {
      ObjectKey key = key(name);
      JournalRecord.ResultKept kept = keptOnWorkers.get(name);
      if (kept != null && !workerGrace.isZero() && !store.contains(key)) {
        // Kept in a remote worker's store: held again, and awaited from that worker.
        plane.restoredRemoteWork().awaitResult(key, kept, count);
        for (int i = 0; i < count; i++) {
          session.holds().adopt(key);
        }
        return;
      }
      for (int i = 0; i < count; i++) {
        if (!store.retainIfPresent(key)) {
          missingObjects++;
          LOG.warning("session " + opened.sessionId() + " of " + opened.user() + " held object "
              + key + ", whose store file did not survive the restart; fetching it fails");
          break;
        }
        session.holds().adopt(key);
      }
    });
    for (String name : saved.functions()) {
      ObjectKey key = key(name);
      if (store.retainIfPresent(key)) {
        session.holdFunction(key);
      } else {
        missingObjects++; // the calls that need it fail below
      }
    }
    return session;
  }

  /**
   * The directory of spilled resident values (issue 29), for the restored sessions' handles: a
   * remote worker's spill is awaited from it (lost if it does not reattach with it); one of the
   * embedded worker, whose agent died with the runtime, is served from the runtime's store
   * when its file survived.
   */
  private void restoreSpills(JournalState state) {
    java.util.Set<String> live = new java.util.HashSet<>();
    state.sessions().forEach(saved -> live.add(saved.opened().sessionId()));
    for (JournalRecord.ResidentSpill spill : state.residentSpills()) {
      Map<String, String> handles = new java.util.LinkedHashMap<>();
      for (int i = 0; i < spill.handles().length; i++) {
        String session = spill.sessions()[i];
        if (session.isEmpty() || live.contains(session)) {
          handles.put(spill.handles()[i], session);
        }
      }
      ObjectKey key = key(spill.key());
      boolean embedded = spill.workerId().equals(embeddedWorkerId);
      if (handles.isEmpty() || (embedded ? !store.retainIfPresent(key) : workerGrace.isZero())) {
        continue; // its sessions ended, or nothing can bring it back: the calls say it is lost
      }
      if (!embedded) {
        plane.restoredRemoteWork().awaitSpill(key, spill.workerId(), spill.size(),
            spill.kind());
      }
      plane.objects().residents().restored(spill.workerId(), embedded, key, spill.size(),
          spill.kind(), handles);
    }
  }

  private Task restoreCall(JournalState.Call call, ClientSession session) {
    CallAccepted a = call.accepted();
    List<ObjectKey> refs = new ArrayList<>();
    for (String ref : a.refs()) {
      refs.add(key(ref));
    }
    Task task = new Task(a.taskId(), a.name(), session.identity(),
        new Demand(a.gpus(), a.cpus(), a.memoryBytes(), call.gpuEighths()), key(a.function()),
        key(a.args()),
        refs, a.timeoutSeconds(), session, System.nanoTime());
    task.allowRetries(call.retriesLeft());
    task.scheduling(a.qos(), a.priority(), a.credits(), Duration.ofMillis(a.walltimeMillis()));
    task.restored(Instant.ofEpochMilli(a.submittedMillis()), call.attempts());
    String missing = retainInputs(task, session);
    plane.tasks().add(task);
    session.callAccepted(task.id());
    if (missing != null) {
      missingObjects++;
      plane.tasks().transition(task, TaskState.ERROR, TaskEvents.failed(task.id(),
          FailureCode.WORKER_LOST, task.name() + "() cannot run again after the runtime"
              + " restarted: its " + missing + " was lost (its store file did not survive)."
              + " Submit the call again with its arguments", RuntimeTimings.getDefaultInstance()));
    } else if (call.runningOn() != null && ranRemotely(call.runningOn())) {
      // Its worker outlived the runtime and may still run it: it waits for it to reattach.
      plane.restoredRemoteWork().await(task, call.runningOn());
    } else if (call.runningOn() != null) {
      // Running on the embedded worker when the runtime died: the run is lost with it, and the
      // call runs again. (A call that was queued is queued still: its client heard nothing else.)
      plane.tasks().announce(task, TaskEvents.queued(task.id()));
    }
    return task;
  }

  /** Whether a call that ran on {@code workerId} ran on a remote worker (not the embedded one). */
  private boolean ranRemotely(String workerId) {
    return !workerGrace.isZero() && !workerId.equals(embeddedWorkerId)
        && plane.worker(workerId).map(AttachedWorker::remote).orElse(true);
  }

  /** Takes the references the call held (its arguments and refs); the name of a missing one. */
  private String retainInputs(Task task, ClientSession session) {
    if (!session.holdsFunction(task.function()) && !store.contains(task.function())) {
      return "function " + task.function().id();
    }
    List<ObjectKey> taken = new ArrayList<>();
    List<ObjectKey> inputs = new ArrayList<>();
    inputs.add(task.args());
    inputs.addAll(task.refs());
    for (ObjectKey key : inputs) {
      if (!store.retainIfPresent(key)) {
        taken.forEach(store::release);
        return (key.equals(task.args()) ? "argument object " : "input object ") + key.id();
      }
      taken.add(key);
    }
    return null;
  }

  /** Parsed once each: many calls name the same function (a map of 100,000 calls, one). */
  private final java.util.Map<String, ObjectKey> keys = new java.util.HashMap<>();

  private ObjectKey key(String name) {
    return keys.computeIfAbsent(name, text -> {
      int slash = text.indexOf('/');
      return ObjectKey.of(text.substring(0, slash), text.substring(slash + 1));
    });
  }

  private static TaskEvent parse(byte[] bytes) {
    try {
      return TaskEvent.parseFrom(bytes);
    } catch (InvalidProtocolBufferException e) {
      return null;
    }
  }
}
