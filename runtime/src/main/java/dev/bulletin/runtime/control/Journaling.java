package dev.bulletin.runtime.control;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.protocol.TaskEvent;
import dev.bulletin.runtime.api.ClientSession;
import dev.bulletin.runtime.identity.Identity;
import dev.bulletin.runtime.journal.JournalRecord;
import dev.bulletin.runtime.journal.StateJournal;
import dev.bulletin.runtime.task.Task;
import dev.bulletin.runtime.task.TaskState;
import dev.bulletin.runtime.task.TaskTable;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;

/**
 * Turns the control plane's changes into journal records (docs/durability.md): the hook points
 * of {@link ControlPlane}, the task table, the ledger and the sessions' holds call it, and it
 * knows which record each change is. Used on the control plane's event loop only.
 */
public final class Journaling implements TaskTable.Listener {
  /** Session seqs are reserved this far ahead, so a restored session's seq is past any sent. */
  static final long SEQ_BLOCK = 10_000;
  /** A new block is reserved while this many seqs of the current one are still unused. */
  static final long SEQ_MARGIN = 2_000;

  private final StateJournal journal;
  /** Sessions the journal has opened, with the seq reserved for each. */
  private final Map<String, Long> sessions = new HashMap<>();
  /** Set while a restore recreates what the journal already holds: nothing is appended twice. */
  private boolean restoring;
  private static final long PROBE_NANOS = 200_000_000;
  private long lastProbe;

  public Journaling(StateJournal journal) {
    this.journal = journal;
  }

  public StateJournal journal() {
    return journal;
  }

  /** The mark to pass to {@link #durable}: changes after it are what an acknowledgement covers. */
  public long mark() {
    return journal.nextSeq();
  }

  /** Completes once every change since {@code mark} is on disk; fails if one could not be. */
  public CompletableFuture<Void> durable(long mark) {
    return journal.sync(mark);
  }

  /**
   * Completes once every change since {@code mark} is written into the journal's file, synced or
   * not: it survives a crash of the runtime's process, not a power loss. Often complete at once
   * (the write happens on this thread when the journal's writer is not busy).
   */
  public CompletableFuture<Void> written(long mark) {
    return journal.written(mark);
  }

  /**
   * Why the journal cannot write now (full disk), or null. While it cannot, a small record is
   * written now and then to find out when it can again: refused calls write nothing.
   */
  public String failure() {
    String failure = journal.failure();
    long now = System.nanoTime();
    if (failure != null && now - lastProbe > PROBE_NANOS) {
      lastProbe = now;
      journal.append(new JournalRecord.SessionSeq("", 0)); // names no session: changes nothing
    }
    return failure;
  }

  void restoring(boolean restoring) {
    this.restoring = restoring;
  }

  /**
   * A restored session: open in the journal already, with this seq reserved. Its events now
   * are numbered after {@code reservedSeq}, so the next block is reserved at once (the runtime
   * waits for it to be on disk before it serves): were this run killed before a reservation of
   * its own reached the disk, the next one would number its events from {@code reservedSeq}
   * again, reusing seqs the client has seen, and the client would skip those events (a call
   * whose end it never hears).
   */
  void restoredSession(String sessionId, long reservedSeq) {
    long next = reservedSeq + SEQ_BLOCK;
    sessions.put(sessionId, next);
    journal.append(new JournalRecord.SessionSeq(sessionId, next));
  }

  private void ensureSession(String sessionId, Identity identity) {
    if (!sessions.containsKey(sessionId)) {
      sessions.put(sessionId, SEQ_BLOCK);
      journal.append(new JournalRecord.SessionOpened(sessionId, identity.user(),
          identity.group(), identity.owner(), identity.admin(), System.currentTimeMillis()));
      journal.append(new JournalRecord.SessionSeq(sessionId, SEQ_BLOCK));
    }
  }

  /**
   * Reserves more seqs before the session's events reach the end of its block: a restored
   * session starts numbering after the block, past every event its client may have seen.
   */
  public void seqUsed(ClientSession session) {
    Long reserved = sessions.get(session.id());
    if (reserved != null && session.lastSeq() + SEQ_MARGIN > reserved) {
      long next = session.lastSeq() + SEQ_BLOCK;
      sessions.put(session.id(), next);
      journal.append(new JournalRecord.SessionSeq(session.id(), next));
    }
  }

  void accepted(Task task, ClientSession session, int retries) {
    if (restoring) {
      return;
    }
    ensureSession(session.id(), session.identity());
    String[] refs = task.refs().stream().map(ObjectKey::toString).toArray(String[]::new);
    journal.append(new JournalRecord.CallAccepted(task.id(), session.id(), task.name(),
        task.owner().user(), task.owner().group(), task.demand().gpus(), task.demand().cpus(),
        task.demand().memoryBytes(), task.function().toString(), task.args().toString(), refs,
        task.timeoutSeconds(), task.qos(), task.priority(), task.credits(),
        task.walltime().toMillis(), retries, task.submittedAt().toEpochMilli()));
    if (task.demand().fractional()) {
      journal.append(new JournalRecord.CallGpuShare(task.id(), task.demand().gpuEighths()));
    }
  }

  /** A session took or dropped a reference on an object (its holds, or a function). */
  public void hold(String sessionId, Identity identity, ObjectKey key, boolean function,
      int delta) {
    if (restoring) {
      return;
    }
    if (delta < 0 && !sessions.containsKey(sessionId)) {
      return; // the journal never heard of its hold
    }
    ensureSession(sessionId, identity);
    journal.append(new JournalRecord.SessionHold(sessionId, key.toString(), function, delta));
  }

  /**
   * A session took a result kept only on a remote worker: where it lives, so that a restart
   * restores the hold and waits for that worker (its {@link JournalRecord.SessionHold} follows).
   */
  void resultKept(ObjectKey key, String workerId, long size, String kind) {
    if (!restoring) {
      journal.append(new JournalRecord.ResultKept(key.toString(), workerId, size, kind));
    }
  }

  /** The runtime's directory of spilled resident values took or let go a spill (issue 29). */
  dev.bulletin.runtime.objects.ResidentDirectory.Listener residents() {
    return new dev.bulletin.runtime.objects.ResidentDirectory.Listener() {
      @Override
      public void taken(dev.bulletin.runtime.objects.ResidentSpill spill) {
        if (!restoring) {
          Map<String, String> handles = spill.handles();
          String[] ids = handles.keySet().toArray(String[]::new);
          String[] sessions = java.util.Arrays.stream(ids).map(handles::get)
              .toArray(String[]::new);
          journal.append(new JournalRecord.ResidentSpill(spill.key().toString(),
              spill.workerId(), spill.size(), spill.kind(), ids, sessions));
        }
      }

      @Override
      public void released(String workerId, ObjectKey key) {
        if (!restoring) {
          journal.append(new JournalRecord.ResidentSpillReleased(key.toString(), workerId));
        }
      }
    };
  }

  void sessionClosed(ClientSession session) {
    holdsReleased(session.id());
  }

  /**
   * A session's holds were all released: it ended, or an object call started them and no
   * session stream claimed them (api.Sessions).
   */
  public void holdsReleased(String sessionId) {
    if (sessions.remove(sessionId) != null) {
      journal.append(new JournalRecord.SessionClosed(sessionId));
    }
  }

  /**
   * The runtime stops cleanly: its sessions end with it (their calls stop), so a later start
   * restores the ledger and nothing to resume. A crash writes none of this.
   */
  public void stopped() {
    sessions.keySet().forEach(id -> journal.append(new JournalRecord.SessionClosed(id)));
    sessions.clear();
  }

  /** A pool launched, adopted or ended a worker ({@code workers.PoolJournal} makes the record). */
  public void poolWorker(JournalRecord.PoolWorker record) {
    journal.append(record);
  }

  void ledger(JournalRecord.Ledger image) {
    if (!restoring) {
      journal.append(image);
    }
  }

  /**
   * A call is about to be sent to its worker, for its next attempt: from here on a crash counts
   * it as run (ControlPlane sends it once this is written, or on disk for a remote worker: see
   * {@link JournaledDispatch}).
   */
  void dispatching(Task task, String workerId) {
    if (task.sink() instanceof ClientSession) {
      journal.append(new JournalRecord.CallStarted(task.id(), workerId, task.attempts() + 1));
    }
  }

  @Override
  public void told(Task task, TaskState to, TaskEvent event) {
    if (!(task.sink() instanceof ClientSession session)) {
      return;
    }
    if (to == TaskState.QUEUED) {
      journal.append(new JournalRecord.CallRequeued(task.id(), task.retriesLeft()));
    } else if (to.isTerminal()) {
      journal.append(new JournalRecord.CallEnded(task.id(), session.id(), event.toByteArray()));
    }
    if (event != null) {
      seqUsed(session);
    }
  }

  @Override
  public void announced(Task task) {
    if (task.sink() instanceof ClientSession session) {
      seqUsed(session);
    }
  }
}
