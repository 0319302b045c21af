package dev.bulletin.runtime.workers;

import dev.bulletin.runtime.journal.JournalRecord;
import dev.bulletin.runtime.pool.ProviderKind;
import dev.bulletin.runtime.pool.WorkerHandle;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.logging.Logger;

/**
 * Pools' workers in the journal (docs/durability.md): a {@link JournalRecord.PoolWorker} when a
 * pool launches or adopts a worker, and one when it ends, so that a restarted runtime knows
 * which processes and Slurm jobs it launched: it adopts those still there (they reattach like
 * any remote worker) and forgets or stops the others, instead of leaking or launching them
 * twice. The provider's handle is kept as {@code KIND:id} (LOCAL:pid, SLURM:job id,
 * K8S:namespace/name).
 */
public final class PoolJournal {
  private static final Logger LOG = Logger.getLogger(PoolJournal.class.getName());

  private PoolJournal() { }

  /** The record of a worker launched ({@code up}) or ended. */
  public static JournalRecord.PoolWorker record(WorkerHandle handle, boolean up) {
    return new JournalRecord.PoolWorker(handle.pool(), handle.workerId(),
        handle.provider().journalTag() + ":" + handle.providerId(), up);
  }

  /** The handles of the journaled workers; one whose handle this version cannot read is left. */
  public static List<WorkerHandle> handles(Collection<JournalRecord.PoolWorker> journaled) {
    List<WorkerHandle> out = new ArrayList<>();
    for (JournalRecord.PoolWorker worker : journaled) {
      int colon = worker.handle().indexOf(':');
      try {
        out.add(new WorkerHandle(ProviderKind.ofJournalTag(worker.handle().substring(0, colon)),
            worker.pool(), worker.workerId(), worker.handle().substring(colon + 1)));
      } catch (IllegalArgumentException | IndexOutOfBoundsException e) {
        LOG.warning("journaled pool worker " + worker.workerId() + " has a handle this version"
            + " cannot read (" + worker.handle() + "); it is not adopted");
      }
    }
    return out;
  }
}
