package dev.bulletin.runtime.journal;

import dev.bulletin.runtime.journal.JournalRecord.CallAccepted;
import dev.bulletin.runtime.journal.JournalRecord.CallEnded;
import dev.bulletin.runtime.journal.JournalRecord.CallRequeued;
import dev.bulletin.runtime.journal.JournalRecord.CallStarted;
import dev.bulletin.runtime.journal.JournalRecord.Ledger;
import dev.bulletin.runtime.journal.JournalRecord.PoolWorker;
import dev.bulletin.runtime.journal.JournalRecord.ResultKept;
import dev.bulletin.runtime.journal.JournalRecord.SessionClosed;
import dev.bulletin.runtime.journal.JournalRecord.SessionHold;
import dev.bulletin.runtime.journal.JournalRecord.SessionOpened;
import dev.bulletin.runtime.journal.JournalRecord.SessionSeq;
import dev.bulletin.runtime.journal.JournalRecord.SnapshotEnd;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * The state the journal's records add up to: open sessions and what they hold, calls not ended
 * (in submit order), the ledger, pools' workers. Replaying the records into it is the restore;
 * writing it out as records is the snapshot. Not thread-safe: one owner at a time (the journal's
 * writer thread while it runs; the restore before).
 */
public final class JournalState {

  /** A session and the references it held. */
  public static final class Session {
    private final SessionOpened opened;
    /** {@code namespace/id} to count. */
    private final Map<String, Integer> holds = new TreeMap<>();
    private final Set<String> functions = new HashSet<>();
    /** Terminal events of its calls, by task id, in the order they ended. */
    private final Map<String, byte[]> ended = new LinkedHashMap<>() {
      @Override
      protected boolean removeEldestEntry(Map.Entry<String, byte[]> eldest) {
        return size() > MAX_ENDED_PER_SESSION;
      }
    };
    private long reservedSeq;

    Session(SessionOpened opened) {
      this.opened = opened;
    }

    public SessionOpened opened() {
      return opened;
    }

    public Map<String, Integer> holds() {
      return Collections.unmodifiableMap(holds);
    }

    public Set<String> functions() {
      return Collections.unmodifiableSet(functions);
    }

    /** The terminal events of its latest calls, by task id, oldest first. */
    public Map<String, byte[]> endedCalls() {
      return Collections.unmodifiableMap(ended);
    }

    /** Its events may have been numbered up to this. */
    public long reservedSeq() {
      return reservedSeq;
    }
  }

  /** A call that has not ended: how it was accepted, and where it is now. */
  public static final class Call {
    private final CallAccepted accepted;
    private String runningOn;
    private int attempts;
    private int retriesLeft;
    private int gpuEighths;

    Call(CallAccepted accepted) {
      this.accepted = accepted;
      this.retriesLeft = accepted.retries();
    }

    public CallAccepted accepted() {
      return accepted;
    }

    /** The worker it was running on, or null while queued. */
    public String runningOn() {
      return runningOn;
    }

    /** How many runs started (0: it never started). */
    public int attempts() {
      return attempts;
    }

    public int retriesLeft() {
      return retriesLeft;
    }

    /** Its share of one GPU in eighths ({@link JournalRecord.CallGpuShare}); 0: whole GPUs. */
    public int gpuEighths() {
      return gpuEighths;
    }
  }

  /**
   * Ended calls' events kept per session for its client to hear after a restart: the latest
   * ones (a client that resumes has seen the older ones, or acknowledged them long ago).
   */
  static final int MAX_ENDED_PER_SESSION = 10_000;

  private final Map<String, Session> sessions = new LinkedHashMap<>();
  private final Map<String, Call> calls = new LinkedHashMap<>();
  private final Map<String, PoolWorker> poolWorkers = new LinkedHashMap<>();
  /** Results that live only in a remote worker's store, by key, while a session holds them. */
  private final Map<String, ResultKept> keptResults = new LinkedHashMap<>();
  /** Spills of resident values the runtime's directory names, by "worker key". */
  private final Map<String, JournalRecord.ResidentSpill> residentSpills = new LinkedHashMap<>();
  private Ledger ledger = new Ledger(new JournalRecord.GroupUsage[0],
      new JournalRecord.UserUsage[0]);

  /** Applies one record. Records about unknown sessions or calls are ignored (already gone). */
  public void apply(JournalRecord record) {
    if (record instanceof SessionOpened opened) {
      sessions.putIfAbsent(opened.sessionId(), new Session(opened));
    } else if (record instanceof SessionSeq seq) {
      Session session = sessions.get(seq.sessionId());
      if (session != null) {
        session.reservedSeq = Math.max(session.reservedSeq, seq.reservedSeq());
      }
    } else if (record instanceof SessionClosed closed) {
      // Its calls were stopped with it.
      sessions.remove(closed.sessionId());
      calls.values().removeIf(call -> call.accepted.sessionId().equals(closed.sessionId()));
    } else if (record instanceof SessionHold hold) {
      hold(hold);
    } else if (record instanceof CallAccepted accepted) {
      calls.putIfAbsent(accepted.taskId(), new Call(accepted));
    } else if (record instanceof JournalRecord.CallGpuShare share) {
      Call call = calls.get(share.taskId());
      if (call != null) {
        call.gpuEighths = share.gpuEighths();
      }
    } else if (record instanceof CallStarted started) {
      Call call = calls.get(started.taskId());
      if (call != null) {
        call.runningOn = started.workerId();
        call.attempts = Math.max(call.attempts, started.attempt());
      }
    } else if (record instanceof CallRequeued requeued) {
      Call call = calls.get(requeued.taskId());
      if (call != null) {
        call.runningOn = null;
        call.retriesLeft = requeued.retriesLeft();
      }
    } else if (record instanceof CallEnded ended) {
      calls.remove(ended.taskId());
      Session session = sessions.get(ended.sessionId());
      if (session != null) {
        session.ended.put(ended.taskId(), ended.event());
      }
    } else if (record instanceof Ledger next) {
      ledger = next;
    } else if (record instanceof ResultKept kept) {
      keptResults.put(kept.key(), kept);
    } else if (record instanceof JournalRecord.ResidentSpill spill) {
      residentSpills.put(spill.workerId() + " " + spill.key(), spill);
    } else if (record instanceof JournalRecord.ResidentSpillReleased released) {
      residentSpills.remove(released.workerId() + " " + released.key());
    } else if (record instanceof PoolWorker worker) {
      if (worker.up()) {
        poolWorkers.put(worker.workerId(), worker);
      } else {
        poolWorkers.remove(worker.workerId());
      }
    }
    // SnapshotEnd changes nothing.
  }

  private void hold(SessionHold hold) {
    Session session = sessions.get(hold.sessionId());
    if (session == null) {
      return;
    }
    if (!hold.function()) {
      session.holds.merge(hold.key(), hold.delta(), (a, b) -> a + b <= 0 ? null : a + b);
      if (hold.delta() < 0 && keptResults.containsKey(hold.key())
          && sessions.values().stream().noneMatch(s -> s.holds.containsKey(hold.key()))) {
        keptResults.remove(hold.key()); // no session holds it: its location no longer matters
      }
    } else if (hold.delta() > 0) {
      session.functions.add(hold.key());
    } else {
      session.functions.remove(hold.key());
    }
  }

  public Collection<Session> sessions() {
    return Collections.unmodifiableCollection(sessions.values());
  }

  /** Calls not ended, in the order they were accepted. */
  public Collection<Call> calls() {
    return Collections.unmodifiableCollection(calls.values());
  }

  public Ledger ledger() {
    return ledger;
  }

  /** Where results held by sessions and kept only on remote workers live, by key. */
  public Map<String, ResultKept> keptResults() {
    return Collections.unmodifiableMap(keptResults);
  }

  /** The spills of resident values the runtime's directory named (issue 29). */
  public Collection<JournalRecord.ResidentSpill> residentSpills() {
    return Collections.unmodifiableCollection(residentSpills.values());
  }

  public Collection<PoolWorker> poolWorkers() {
    return Collections.unmodifiableCollection(poolWorkers.values());
  }

  /** The records that rebuild this state from nothing, ending with {@link SnapshotEnd}. */
  public List<JournalRecord> asRecords() {
    List<JournalRecord> out = new ArrayList<>();
    for (ResultKept kept : keptResults.values()) {
      if (sessions.values().stream().anyMatch(s -> s.holds.containsKey(kept.key()))) {
        out.add(kept);
      }
    }
    for (Session session : sessions.values()) {
      out.add(session.opened);
      String id = session.opened.sessionId();
      out.add(new SessionSeq(id, session.reservedSeq));
      session.holds.forEach((key, count) -> {
        for (int i = 0; i < count; i++) {
          out.add(new SessionHold(id, key, false, 1));
        }
      });
      session.functions.forEach(key -> out.add(new SessionHold(id, key, true, 1)));
    }
    for (Call call : calls.values()) {
      out.add(call.accepted);
      if (call.gpuEighths > 0) {
        out.add(new JournalRecord.CallGpuShare(call.accepted.taskId(), call.gpuEighths));
      }
      if (call.retriesLeft != call.accepted.retries()) {
        out.add(new CallRequeued(call.accepted.taskId(), call.retriesLeft));
      }
      if (call.attempts > 0) {
        // The attempt count survives even when the call is queued again.
        out.add(new CallStarted(call.accepted.taskId(), call.runningOn, call.attempts));
        if (call.runningOn == null) {
          out.add(new CallRequeued(call.accepted.taskId(), call.retriesLeft));
        }
      }
    }
    // Ended calls' events go after every call: replaying one needs its session, and ends it.
    for (Session session : sessions.values()) {
      session.ended.forEach((taskId, event) -> out.add(new CallEnded(taskId,
          session.opened.sessionId(), event)));
    }
    out.add(ledger);
    out.addAll(poolWorkers.values());
    out.addAll(residentSpills.values());
    out.add(new SnapshotEnd(out.size()));
    return out;
  }
}
