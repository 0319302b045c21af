package dev.bulletin.runtime.journal.impl;

import com.esotericsoftware.kryo.Kryo;
import com.esotericsoftware.kryo.io.Output;
import dev.bulletin.runtime.journal.JournalException;
import dev.bulletin.runtime.journal.JournalOptions;
import dev.bulletin.runtime.journal.JournalRecord;
import dev.bulletin.runtime.journal.JournalState;
import dev.bulletin.runtime.journal.Journals;
import dev.bulletin.runtime.journal.StateJournal;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileLock;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.locks.ReentrantLock;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * The journal on Kryo: records are queued by the control plane and written by one thread of
 * its own, as many as are queued per write and one fsync per write (group commit), so the event
 * loop never waits for a disk. The writer keeps the state the records add up to; when the log
 * outgrows {@link JournalOptions#compactBytes} it starts a new log and writes that state as a
 * snapshot beside it, then drops the older files.
 */
public final class KryoJournal implements StateJournal {
  private static final Logger LOG = Logger.getLogger(KryoJournal.class.getName());
  /** Records nobody waits for are written and synced this long after they were appended. */
  private static final long IDLE_FLUSH_MILLIS = 50;

  private final JournalOptions options;
  private final JournalFiles files;
  private final FileLock lock;
  /** The state as of the records written so far: the writer thread's own. */
  private final JournalState written;
  private final Thread writer;
  private final JournalQueue queue;

  /**
   * Held to encode and write a batch into the log, and to start a new log: by the writer
   * thread, or by a caller of {@link #written} that finds it free (never waited for there).
   * Not held while syncing, so that a write may go on meanwhile.
   */
  private final ReentrantLock writeLock = new ReentrantLock();
  // Under writeLock: the log, its size, the encoder, and the records written but not yet
  // applied to the writer thread's state.
  private FrameSink log;
  private long logNumber;
  private long logBytes;
  private boolean stopped;
  private final Kryo kryo = KryoRegistry.POOL.obtain();
  private final Output scratch = new Output(4096, -1);
  private final Output frames = new Output(1 << 16, -1);
  private List<JournalRecord> unapplied = new ArrayList<>();

  private boolean compactDue;

  private KryoJournal(JournalOptions options, JournalFiles files, FileLock lock,
      JournalState written, long logNumber, boolean compactDue) throws IOException {
    this.options = options;
    this.files = files;
    this.lock = lock;
    this.written = written;
    this.compactDue = compactDue;
    this.queue = new JournalQueue(files.folder());
    startLog(logNumber);
    this.writer = new Thread(this::writeLoop, "bulletin-journal");
    writer.setDaemon(true);
    writer.start();
  }

  /** Reads the folder (latest snapshot, then the logs after it) and opens a new log. */
  public static Journals.Opened open(JournalOptions options) {
    JournalFiles files = new JournalFiles(options.folder());
    FileLock lock = files.lock();
    try {
      files.removeTemporaries();
      JournalState state = new JournalState();
      long[] counts = new long[3]; // records, dropped bytes, log bytes replayed
      List<Long> snapshots = files.numbers("snapshot");
      long base = snapshots.isEmpty() ? 0 : snapshots.get(snapshots.size() - 1);
      if (!snapshots.isEmpty()) {
        readSnapshot(files.snapshot(base), state, counts);
      }
      List<Long> logs = files.numbers("log");
      long last = base;
      for (int i = 0; i < logs.size(); i++) {
        long n = logs.get(i);
        if (n < base) {
          Files.deleteIfExists(files.log(n)); // already in the snapshot; its removal was cut short
          continue;
        }
        readLog(files.log(n), i == logs.size() - 1, state, counts);
        last = Math.max(last, n);
      }
      JournalState written = new JournalState();
      state.asRecords().forEach(written::apply);
      boolean compactDue = counts[2] > options.compactBytes() / 4;
      KryoJournal journal = new KryoJournal(options, files, lock, written, last + 1, compactDue);
      return new Journals.Opened(journal, state, counts[0], counts[1]);
    } catch (IOException e) {
      release(lock);
      throw new JournalException("cannot read the journal in " + options.folder() + ": " + e, e);
    } catch (RuntimeException e) {
      release(lock);
      throw e;
    }
  }

  private static void readSnapshot(Path file, JournalState state, long[] counts)
      throws IOException {
    boolean[] complete = {false};
    Frames.Read read = Frames.read(file, Frames.KIND_SNAPSHOT, record -> {
      complete[0] = record instanceof JournalRecord.SnapshotEnd;
      state.apply(record);
    });
    if (read.torn() || !complete[0]) {
      // Snapshots appear by rename once complete and synced: this is damage, not a crash.
      throw new JournalException("the journal snapshot " + file + " is damaged (" + read.records()
          + " records readable of " + read.fileBytes() + " bytes); move the folder "
          + file.getParent() + " away to start with an empty state (its calls are then lost)");
    }
    counts[0] += read.records();
  }

  private static void readLog(Path file, boolean lastLog, JournalState state, long[] counts)
      throws IOException {
    Frames.Read read = Frames.read(file, Frames.KIND_LOG, state::apply);
    counts[0] += read.records();
    counts[2] += read.validBytes();
    if (!read.torn()) {
      return;
    }
    if (!lastLog) {
      throw new JournalException("the journal log " + file + " is damaged at byte "
          + read.validBytes() + " although later logs follow it; move the folder "
          + file.getParent() + " away to start with an empty state (its calls are then lost)");
    }
    long dropped = read.fileBytes() - read.validBytes();
    counts[1] += dropped;
    LOG.warning("journal: dropped a torn tail of " + dropped + " bytes at the end of " + file
        + " (the runtime stopped while writing it; those records were never acknowledged)");
    if (read.validBytes() < Frames.HEADER_BYTES) {
      Files.deleteIfExists(file);
    } else {
      try (var channel = java.nio.channels.FileChannel.open(file,
          java.nio.file.StandardOpenOption.WRITE)) {
        channel.truncate(read.validBytes());
        channel.force(false);
      }
    }
  }

  private void startLog(long number) throws IOException {
    FrameSink next = options.sinks().open(files.log(number));
    try {
      next.truncate(0);
      next.write(Frames.header(Frames.KIND_LOG));
      next.force();
    } catch (IOException e) {
      next.close();
      Files.deleteIfExists(files.log(number));
      throw e;
    }
    files.syncFolder();
    if (log != null) {
      log.close();
    }
    log = next;
    logNumber = number;
    logBytes = Frames.HEADER_BYTES;
  }

  // ---- appending (the control plane's thread) -------------------------------------------------

  @Override
  public long append(JournalRecord record) {
    return queue.append(record);
  }

  /**
   * Writes what is pending on the calling thread first (see {@link #written}): the writer
   * thread then only syncs, and a dispatch in the same turn finds the log free to write its own
   * records instead of waiting for the writer's write and then its fsync.
   */
  @Override
  public CompletableFuture<Void> sync(long sinceSeq) {
    writeIfFree();
    return queue.whenDurable(sinceSeq);
  }

  /**
   * Writes what is pending on the calling thread when no other write holds the log (a buffered
   * write into the kernel's cache: microseconds, no fsync), so that a dispatch waits for no
   * thread hop; else the writer thread writes it and completes the future.
   */
  @Override
  public CompletableFuture<Void> written(long sinceSeq) {
    writeIfFree();
    return queue.whenWritten(sinceSeq);
  }

  private void writeIfFree() {
    if (writeLock.tryLock()) {
      try {
        writePending();
      } finally {
        writeLock.unlock();
      }
    }
  }

  @Override
  public long nextSeq() {
    return queue.nextSeq();
  }

  @Override
  public String failure() {
    return queue.failure();
  }

  @Override
  public boolean enabled() {
    return true;
  }

  @Override
  public Path folder() {
    return files.folder();
  }

  // ---- writing ------------------------------------------------------------------------------

  /** Encodes and writes the pending records as one write; the caller holds the write lock. */
  private void writePending() {
    if (stopped) {
      return;
    }
    JournalQueue.Batch batch = queue.take();
    if (batch.records().isEmpty()) {
      return;
    }
    IOException error = null;
    frames.reset();
    for (JournalRecord record : batch.records()) {
      Frames.encode(kryo, scratch, record, frames);
    }
    try {
      log.write(ByteBuffer.wrap(frames.getBuffer(), 0, frames.position()));
      logBytes += frames.position();
      unapplied.addAll(batch.records());
    } catch (IOException e) {
      error = e;
      try {
        log.truncate(logBytes); // the next batch starts on a frame boundary
      } catch (IOException ignored) {
        // A restart drops the partial frame as a torn tail.
      }
    }
    if (frames.getBuffer().length > 1 << 20) {
      frames.setBuffer(new byte[1 << 16], -1); // one large batch does not keep its buffer
    }
    queue.written(batch, error);
  }

  /** The journal's thread: writes what nobody else did, syncs, and compacts when due. */
  private void writeLoop() {
    try {
      if (compactDue) {
        compact();
      }
      while (queue.awaitWork(IDLE_FLUSH_MILLIS)) {
        boolean compactNow;
        List<JournalRecord> toApply;
        writeLock.lock();
        try {
          writePending();
          toApply = unapplied;
          unapplied = new ArrayList<>();
          compactNow = logBytes > options.compactBytes();
        } finally {
          writeLock.unlock();
        }
        if (queue.writeAwaited()) {
          // A dispatch found the log taken by the write above: it waits for a write, not for
          // the fsync that follows.
          writeLock.lock();
          try {
            writePending();
          } finally {
            writeLock.unlock();
          }
        }
        syncWritten();
        toApply.forEach(written::apply); // the writer's own state: outside the lock
        if (compactNow) {
          compact();
        }
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** Folds every record written so far into the state; under the write lock. */
  private void applyWritten() {
    unapplied.forEach(written::apply);
    unapplied = new ArrayList<>();
  }

  /** One fdatasync for everything written until now (by this thread or another). */
  private void syncWritten() {
    long until = queue.writtenSeq();
    IOException error = null;
    try {
      log.force(); // the writer thread alone replaces the log: this is the one written to
    } catch (IOException e) {
      error = e;
    }
    queue.synced(until, error);
  }

  /** Folds everything written so far into a snapshot beside a new, empty log. */
  private void compact() {
    compactDue = false;
    long number = logNumber + 1;
    Path temp = files.snapshotTemp(number);
    try {
      // The old log is synced and the state brought up to its end before writes go to the
      // new one: the snapshot is then exactly the old logs, and a failed snapshot leaves
      // them complete. The snapshot itself is written without the lock (writes go on).
      writeLock.lock();
      try {
        writePending();
        syncWritten();
        applyWritten();
        startLog(number);
      } finally {
        writeLock.unlock();
      }
      // Dispatches that found the lock taken meanwhile wait for this thread: their records go
      // to the new log now, not after the snapshot (they are not in it: not applied yet).
      writeLock.lock();
      try {
        writePending();
      } finally {
        writeLock.unlock();
      }
      writeSnapshot(temp);
      Files.move(temp, files.snapshot(number), java.nio.file.StandardCopyOption.ATOMIC_MOVE);
      files.syncFolder();
      for (long old : files.numbers("log")) {
        if (old < number) {
          Files.deleteIfExists(files.log(old));
        }
      }
      for (long old : files.numbers("snapshot")) {
        if (old < number) {
          Files.deleteIfExists(files.snapshot(old));
        }
      }
    } catch (IOException | RuntimeException e) {
      // The older snapshot and logs are all still there: nothing is lost, the log just grows.
      LOG.log(Level.WARNING, "journal: compaction into " + files.snapshot(number)
          + " failed; the logs are kept: " + e, e);
      try {
        Files.deleteIfExists(temp);
      } catch (IOException ignored) {
        // Removed at the next start.
      }
    }
  }

  private void writeSnapshot(Path temp) throws IOException {
    Kryo kryo = KryoRegistry.POOL.obtain();
    try (var channel = java.nio.channels.FileChannel.open(temp,
        java.nio.file.StandardOpenOption.CREATE_NEW, java.nio.file.StandardOpenOption.WRITE)) {
      Output scratch = new Output(4096, -1);
      Output out = new Output(1 << 20, -1);
      out.writeBytes(Frames.header(Frames.KIND_SNAPSHOT).array());
      for (JournalRecord record : written.asRecords()) {
        Frames.encode(kryo, scratch, record, out);
        if (out.position() >= 1 << 20) {
          writeFully(channel, out);
        }
      }
      writeFully(channel, out);
      channel.force(true);
    } finally {
      KryoRegistry.POOL.free(kryo);
    }
  }

  private static void writeFully(java.nio.channels.FileChannel channel, Output out)
      throws IOException {
    ByteBuffer bytes = ByteBuffer.wrap(out.getBuffer(), 0, out.position());
    while (bytes.hasRemaining()) {
      channel.write(bytes);
    }
    out.reset();
  }

  @Override
  public void close() {
    if (queue.closing()) {
      return;
    }
    queue.close();
    try {
      writer.join(30_000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    writeLock.lock();
    try {
      stopped = true;
      log.close();
    } catch (IOException ignored) {
      // Everything acknowledged was forced already.
    } finally {
      writeLock.unlock();
    }
    KryoRegistry.POOL.free(kryo);
    release(lock);
  }

  private static void release(FileLock lock) {
    try {
      lock.release();
      lock.channel().close();
    } catch (IOException ignored) {
      // The lock goes with the process anyway.
    }
  }
}
