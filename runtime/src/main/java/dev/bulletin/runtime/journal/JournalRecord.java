package dev.bulletin.runtime.journal;

/**
 * One change of the control plane's state, as the journal keeps it. Records are immutable and
 * made of strings, numbers and arrays only (no collections), so that the Kryo registry stays
 * short and every field is explicit; each has a fixed registration id in
 * {@code journal.impl.KryoRegistry}. A new kind of change is a new record with a new id: ids are
 * never reused, and a field is never removed from a record without a new format version.
 */
public sealed interface JournalRecord {

  /** A client's session began. Its calls and holds are restored under this id. */
  record SessionOpened(String sessionId, String user, String group, boolean owner,
      boolean admin, long atMillis) implements JournalRecord { }

  /**
   * Event numbers up to {@code reservedSeq} may have been sent on the session's stream: a
   * restored session numbers its events after it, so its client's resume finds them.
   */
  record SessionSeq(String sessionId, long reservedSeq) implements JournalRecord { }

  /** A client's session ended: its calls were stopped and its references released. */
  record SessionClosed(String sessionId) implements JournalRecord { }

  /**
   * A session took ({@code delta} 1) or dropped ({@code delta} -1) one reference on an object,
   * named {@code namespace/id}: an upload, a "has it?", a function, a result not fetched yet.
   */
  record SessionHold(String sessionId, String key, boolean function, int delta)
      implements JournalRecord { }

  /**
   * A call was accepted: everything needed to queue it again. Objects are named
   * {@code namespace/id}; their bytes are in the store (inline bytes were put there at submit).
   */
  record CallAccepted(String taskId, String sessionId, String name, String user, String group,
      int gpus, double cpus, long memoryBytes, String function, String args, String[] refs,
      double timeoutSeconds, String qos, int priority, double credits, long walltimeMillis,
      int retries, long submittedMillis) implements JournalRecord { }

  /**
   * The call just accepted asks for a share of one GPU, {@code gpuEighths} of 8 (its
   * {@link CallAccepted} says 0 GPUs). A record of its own, so journals written before
   * fractional GPUs read as they are and {@code CallAccepted} keeps its fields.
   */
  record CallGpuShare(String taskId, int gpuEighths) implements JournalRecord { }

  /** The call started on a worker; {@code attempt} counts its runs, the first is 1. */
  record CallStarted(String taskId, String workerId, int attempt) implements JournalRecord { }

  /** The call went back to the queue (worker lost, preempted, undelivered). */
  record CallRequeued(String taskId, int retriesLeft) implements JournalRecord { }

  /**
   * The call ended; {@code event} is its terminal {@code TaskEvent} (protobuf bytes: the
   * result's metadata, or the failure), kept while its session lasts.
   */
  record CallEnded(String taskId, String sessionId, byte[] event) implements JournalRecord { }

  /** One group's book in the usage ledger. */
  record GroupUsage(String group, double recent, long recentAtMillis, double gpuHours,
      long periodEndsMillis, double credits) { }

  /** One user's recent use in the usage ledger. */
  record UserUsage(String user, double recent, long recentAtMillis) { }

  /** The whole usage ledger after a change (charge, credits spent or earned): it is small. */
  record Ledger(GroupUsage[] groups, UserUsage[] users) implements JournalRecord { }

  /** A pool started ({@code up}) or stopped a worker. */
  record PoolWorker(String pool, String workerId, String handle, boolean up)
      implements JournalRecord { }

  /**
   * A call's result stays in remote worker {@code workerId}'s store (the runtime has no copy)
   * and a session holds it: a restart restores the hold and waits for that worker to reattach
   * with it (docs/durability.md). {@code key} is {@code namespace/id}.
   */
  record ResultKept(String key, String workerId, long size, String kind)
      implements JournalRecord { }

  /**
   * A spill of resident values (issue 29) that the runtime's directory names: its object, the
   * worker whose agent made it and holds it, and each handle in it ({@code handles[i]}, kept by
   * client session {@code sessions[i]}).
   */
  record ResidentSpill(String key, String workerId, long size, String kind, String[] handles,
      String[] sessions) implements JournalRecord { }

  /** The directory let that spill go (dropped, superseded, restored elsewhere, lost). */
  record ResidentSpillReleased(String key, String workerId) implements JournalRecord { }

  /** The last record of a snapshot: a snapshot without it is incomplete and not used. */
  record SnapshotEnd(long records) implements JournalRecord { }
}
