package dev.bulletin.runtime.journal;

import java.nio.file.Path;
import java.util.concurrent.CompletableFuture;

/**
 * The control plane's journal: every change the runtime acknowledges is appended here, and the
 * acknowledgement leaves only once {@link #sync} says the change is on disk. Appending never
 * blocks (the fsyncs run on the journal's own thread, many records per fsync); it may be called
 * from one thread at a time (the control plane's event loop).
 *
 * <p>Two marks: a record is <em>written</em> once it is in the log file (the kernel's page
 * cache holds it: it survives a crash of this process, not a power loss), and <em>durable</em>
 * once it was synced to the disk as well. Records are written and synced in the order appended.
 */
public interface StateJournal extends AutoCloseable {

  /**
   * Queues a record for writing.
   *
   * @return its sequence number, for {@link #sync(long)}
   */
  long append(JournalRecord record);

  /**
   * Completes once every record appended so far is on disk; fails with a
   * {@link JournalWriteException} if any record from {@code sinceSeq} on could not be written.
   */
  CompletableFuture<Void> sync(long sinceSeq);

  /**
   * Completes once every record appended so far is written (not necessarily synced); fails
   * with a {@link JournalWriteException} if any record from {@code sinceSeq} on could not be.
   * May write them on the calling thread (a buffered write, never an fsync), so it often
   * completes before it returns.
   */
  CompletableFuture<Void> written(long sinceSeq);

  /** The sequence number the next {@link #append} will get. */
  long nextSeq();

  /**
   * Why the latest write failed (a full disk, with the folder named), or null while writes
   * succeed: the control plane refuses calls it could not journal instead of losing them.
   */
  String failure();

  /** Whether records are kept at all (false: {@code --no-journal}). */
  boolean enabled();

  /** Where the journal's files are, or null when it is disabled. */
  Path folder();

  /** Writes what is queued, stops the writer thread and releases the folder's lock. */
  @Override
  void close();

  /** A journal that keeps nothing: every sync succeeds at once (the runtime is not durable). */
  static StateJournal disabled() {
    return new StateJournal() {
      private long seq;

      @Override
      public long append(JournalRecord record) {
        return seq++;
      }

      @Override
      public CompletableFuture<Void> sync(long sinceSeq) {
        return CompletableFuture.completedFuture(null);
      }

      @Override
      public CompletableFuture<Void> written(long sinceSeq) {
        return CompletableFuture.completedFuture(null);
      }

      @Override
      public long nextSeq() {
        return seq;
      }

      @Override
      public String failure() {
        return null;
      }

      @Override
      public boolean enabled() {
        return false;
      }

      @Override
      public Path folder() {
        return null;
      }

      @Override
      public void close() { }
    };
  }
}
