package dev.bulletin.runtime.journal.impl;

import dev.bulletin.runtime.journal.JournalRecord;
import dev.bulletin.runtime.journal.JournalWriteException;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.logging.Logger;

/**
 * The records appended and not written yet, and how far the journal got with the rest: records
 * below {@link #writtenSeq} were written into the log file (the kernel holds them: they survive
 * a crash of this process) or failed; those below the durable mark were also synced to the disk
 * (they survive a power loss) or failed. Completes the futures that wait for either. One
 * monitor: every method is short and never touches a file.
 */
final class JournalQueue {
  private static final Logger LOG = Logger.getLogger(KryoJournal.class.getName());
  /** How many failed ranges are remembered for waits that ask after them. */
  private static final int LOST_RANGES = 64;

  /** Records taken for writing, the first one's sequence number with them. */
  record Batch(long first, List<JournalRecord> records) {
    long end() {
      return first + records.size();
    }
  }

  private record Waiter(long since, long until, CompletableFuture<Void> done) { }

  /** Records [from, to) that were not written or not synced, and why. */
  private record LostRange(long from, long to, String message) { }

  private List<JournalRecord> pending = new ArrayList<>();
  private long nextSeq;
  private long writtenSeq;
  private long durableSeq;
  private final ArrayDeque<LostRange> lost = new ArrayDeque<>();
  private final List<Waiter> writtenWaiters = new ArrayList<>();
  private final List<Waiter> durableWaiters = new ArrayList<>();
  /** Someone waits: the writer thread should run a cycle now, not at its idle flush. */
  private boolean asked;
  private boolean closing;
  private volatile String failure;
  private final java.nio.file.Path folder;

  JournalQueue(java.nio.file.Path folder) {
    this.folder = folder;
  }

  synchronized long append(JournalRecord record) {
    if (closing) {
      throw new IllegalStateException("the journal is closed");
    }
    if (pending.isEmpty() && writtenSeq == durableSeq) {
      notifyAll(); // the writer may sleep with nothing to flush: this record starts its idle flush
    }
    pending.add(record);
    return nextSeq++;
  }

  synchronized long nextSeq() {
    return nextSeq;
  }

  String failure() {
    return failure;
  }

  /** The pending records, now the writer's (the caller holds the journal's write lock). */
  synchronized Batch take() {
    Batch batch = new Batch(writtenSeq, pending);
    pending = new ArrayList<>();
    return batch;
  }

  /** The first sequence number not yet written (or failed). */
  synchronized long writtenSeq() {
    return writtenSeq;
  }

  /** Whether a wait for written records is not served yet. */
  synchronized boolean writeAwaited() {
    return !writtenWaiters.isEmpty();
  }

  /** Completes once every record appended so far is written (or fails if one was not). */
  CompletableFuture<Void> whenWritten(long since) {
    return await(since, writtenWaiters, true);
  }

  /** Completes once every record appended so far is synced (or fails if one was not). */
  CompletableFuture<Void> whenDurable(long since) {
    return await(since, durableWaiters, false);
  }

  private synchronized CompletableFuture<Void> await(long since, List<Waiter> waiters,
      boolean written) {
    long until = nextSeq;
    if ((written ? writtenSeq : durableSeq) >= until) {
      String message = lostBetween(since, until);
      return message == null ? CompletableFuture.completedFuture(null)
          : CompletableFuture.failedFuture(new JournalWriteException(message, null));
    }
    CompletableFuture<Void> done = new CompletableFuture<>();
    waiters.add(new Waiter(since, until, done));
    asked = true;
    notifyAll();
    return done;
  }

  /** The batch was written (error null) or not; completes the waits it settles. */
  void written(Batch batch, Exception error) {
    List<Runnable> completions = new ArrayList<>();
    synchronized (this) {
      writtenSeq = batch.end();
      if (error != null) {
        fail(batch.first(), batch.end(), error);
      } else if (failure != null && !batch.records().isEmpty()) {
        LOG.info("journal: writing again in " + folder);
        failure = null;
      }
      settle(writtenWaiters, writtenSeq, error, completions);
      // Records that failed need no sync: a wait for them fails now rather than at the next one.
      if (error != null && durableSeq == batch.first()) {
        durableSeq = batch.end();
        settle(durableWaiters, durableSeq, error, completions);
      }
    }
    completions.forEach(Runnable::run);
  }

  /** Everything below {@code until} was synced (error null) or the sync failed. */
  void synced(long until, Exception error) {
    List<Runnable> completions = new ArrayList<>();
    synchronized (this) {
      if (until <= durableSeq) {
        return;
      }
      if (error != null) {
        fail(durableSeq, until, error);
      }
      durableSeq = until;
      settle(durableWaiters, durableSeq, error, completions);
    }
    completions.forEach(Runnable::run);
  }

  private void fail(long from, long to, Exception error) {
    String message = "cannot write the runtime's journal in " + folder + " ("
        + error.getMessage() + "); calls it cannot journal are refused: free space there, or"
        + " start the runtime with another --state-dir";
    if (failure == null) {
      LOG.severe("journal: " + message);
    }
    failure = message;
    lost.addLast(new LostRange(from, to, message));
    if (lost.size() > LOST_RANGES) {
      lost.removeFirst();
    }
  }

  private void settle(List<Waiter> waiters, long reached, Exception error,
      List<Runnable> completions) {
    for (Iterator<Waiter> it = waiters.iterator(); it.hasNext(); ) {
      Waiter waiter = it.next();
      if (waiter.until() <= reached) {
        it.remove();
        String message = lostBetween(waiter.since(), waiter.until());
        completions.add(message == null ? () -> waiter.done().complete(null)
            : () -> waiter.done().completeExceptionally(new JournalWriteException(message,
                error)));
      }
    }
  }

  /** The failure message if a record in [since, until) was lost; null if none was. */
  private String lostBetween(long since, long until) {
    for (LostRange range : lost) {
      if (range.from() < until && range.to() > since) {
        return range.message();
      }
    }
    return null;
  }

  /**
   * The writer thread's wait for work: returns at once when someone waits for a write or a
   * sync; records nobody waits for are written and synced after {@code idleFlushMillis} (a
   * wake-up per batch of those, not one per record). False once closing and nothing is left.
   */
  synchronized boolean awaitWork(long idleFlushMillis) throws InterruptedException {
    long deadline = 0;
    while (!asked && !closing) {
      boolean unflushed = !pending.isEmpty() || writtenSeq > durableSeq;
      if (!unflushed) {
        deadline = 0;
        wait();
        continue;
      }
      long now = System.nanoTime();
      if (deadline == 0) {
        deadline = now + idleFlushMillis * 1_000_000;
      } else if (now >= deadline) {
        break;
      }
      wait(Math.max(1, (deadline - now) / 1_000_000));
    }
    asked = false;
    return !closing || !pending.isEmpty() || writtenSeq > durableSeq;
  }

  /** The writer thread writes and syncs what is left, then stops. */
  synchronized void close() {
    closing = true;
    notifyAll();
  }

  synchronized boolean closing() {
    return closing;
  }
}
