package dev.bulletin.runtime.journal.impl;

import com.esotericsoftware.kryo.Kryo;
import com.esotericsoftware.kryo.io.Output;
import dev.bulletin.runtime.journal.JournalException;
import dev.bulletin.runtime.journal.JournalOptions;
import dev.bulletin.runtime.journal.JournalRecord;
import dev.bulletin.runtime.journal.JournalState;
import dev.bulletin.runtime.journal.JournalWriteException;
import dev.bulletin.runtime.journal.Journals;
import dev.bulletin.runtime.journal.StateJournal;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileLock;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.CompletableFuture;
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
  /** How many failed batches are remembered for syncs that ask after them. */
  private static final int LOST_RANGES = 64;

  private final JournalOptions options;
  private final JournalFiles files;
  private final FileLock lock;
  /** The state as of the records written so far: the writer thread's own. */
  private final JournalState written;
  private final Thread writer;

  private final Object monitor = new Object();
  private List<JournalRecord> pending = new ArrayList<>();
  private long nextSeq;
  /** Records with a lower sequence number were written, or failed. */
  private long handled;
  private final ArrayDeque<LostRange> lost = new ArrayDeque<>();
  private final List<Waiter> waiters = new ArrayList<>();
  private volatile String failure;
  private boolean closing;

  private FrameSink log;
  private long logNumber;
  private long logBytes;
  private boolean compactDue;

  private record Waiter(long since, long until, CompletableFuture<Void> done) { }

  /** Records [from, to) that were not written, and why. */
  private record LostRange(long from, long to, String message) { }

  private KryoJournal(JournalOptions options, JournalFiles files, FileLock lock,
      JournalState written, long logNumber, boolean compactDue) throws IOException {
    this.options = options;
    this.files = files;
    this.lock = lock;
    this.written = written;
    this.compactDue = compactDue;
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
    synchronized (monitor) {
      if (closing) {
        throw new IllegalStateException("the journal is closed");
      }
      pending.add(record);
      if (pending.size() == 1) {
        monitor.notifyAll();
      }
      return nextSeq++;
    }
  }

  @Override
  public CompletableFuture<Void> sync(long sinceSeq) {
    synchronized (monitor) {
      long until = nextSeq;
      if (handled >= until) {
        String lostMessage = lostBetween(sinceSeq, until);
        return lostMessage == null ? CompletableFuture.completedFuture(null)
            : CompletableFuture.failedFuture(new JournalWriteException(lostMessage, null));
      }
      CompletableFuture<Void> done = new CompletableFuture<>();
      waiters.add(new Waiter(sinceSeq, until, done));
      return done;
    }
  }

  @Override
  public long nextSeq() {
    synchronized (monitor) {
      return nextSeq;
    }
  }

  @Override
  public String failure() {
    return failure;
  }

  @Override
  public boolean enabled() {
    return true;
  }

  @Override
  public Path folder() {
    return files.folder();
  }

  /** The failure message if a record in [since, until) was not written; null if all were. */
  private String lostBetween(long since, long until) {
    for (LostRange range : lost) {
      if (range.from() < until && range.to() > since) {
        return range.message();
      }
    }
    return null;
  }

  // ---- writing (the journal's thread) -------------------------------------------------------

  private void writeLoop() {
    Kryo kryo = KryoRegistry.POOL.obtain();
    Output scratch = new Output(4096, -1);
    Output frames = new Output(1 << 16, -1);
    try {
      if (compactDue) {
        compact();
      }
      while (true) {
        List<JournalRecord> batch;
        long first;
        synchronized (monitor) {
          while (pending.isEmpty() && !closing) {
            monitor.wait();
          }
          if (pending.isEmpty()) {
            return;
          }
          batch = pending;
          pending = new ArrayList<>();
          first = handled;
        }
        IOException error = write(kryo, scratch, frames, batch);
        finish(first, first + batch.size(), error);
        if (error == null) {
          batch.forEach(written::apply);
          if (logBytes > options.compactBytes()) {
            compact();
          }
        }
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } finally {
      KryoRegistry.POOL.free(kryo);
    }
  }

  private IOException write(Kryo kryo, Output scratch, Output frames, List<JournalRecord> batch) {
    frames.reset();
    for (JournalRecord record : batch) {
      Frames.encode(kryo, scratch, record, frames);
    }
    try {
      log.write(ByteBuffer.wrap(frames.getBuffer(), 0, frames.position()));
      log.force();
      logBytes += frames.position();
      return null;
    } catch (IOException e) {
      try {
        log.truncate(logBytes); // the next batch starts on a frame boundary
      } catch (IOException ignored) {
        // A restart drops the partial frame as a torn tail.
      }
      return e;
    }
  }

  private void finish(long first, long end, IOException error) {
    List<Runnable> completions = new ArrayList<>();
    synchronized (monitor) {
      handled = end;
      if (error != null) {
        String message = failureMessage(String.valueOf(error.getMessage()));
        if (failure == null) {
          LOG.severe("journal: " + message);
        }
        failure = message;
        lost.addLast(new LostRange(first, end, message));
        if (lost.size() > LOST_RANGES) {
          lost.removeFirst();
        }
      } else if (failure != null) {
        LOG.info("journal: writing again in " + files.folder());
        failure = null;
      }
      for (Iterator<Waiter> it = waiters.iterator(); it.hasNext(); ) {
        Waiter waiter = it.next();
        if (waiter.until() <= end) {
          it.remove();
          String lostMessage = lostBetween(waiter.since(), waiter.until());
          completions.add(lostMessage == null ? () -> waiter.done().complete(null)
              : () -> waiter.done().completeExceptionally(
                  new JournalWriteException(lostMessage, error)));
        }
      }
    }
    completions.forEach(Runnable::run);
  }

  private String failureMessage(String cause) {
    return "cannot write the runtime's journal in " + files.folder() + " (" + cause + "); calls"
        + " it cannot journal are refused: free space there, or start the runtime with another"
        + " --state-dir";
  }

  /** Folds everything written so far into a snapshot beside a new, empty log. */
  private void compact() {
    compactDue = false;
    long number = logNumber + 1;
    Path temp = files.snapshotTemp(number);
    try {
      startLog(number);
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
    synchronized (monitor) {
      if (closing) {
        return;
      }
      closing = true;
      monitor.notifyAll();
    }
    try {
      writer.join(30_000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    try {
      log.close();
    } catch (IOException ignored) {
      // Everything acknowledged was forced already.
    }
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
