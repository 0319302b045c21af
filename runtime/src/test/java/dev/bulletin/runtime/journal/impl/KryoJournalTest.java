package dev.bulletin.runtime.journal.impl;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.runtime.journal.JournalException;
import dev.bulletin.runtime.journal.JournalOptions;
import dev.bulletin.runtime.journal.JournalRecord;
import dev.bulletin.runtime.journal.JournalRecord.CallAccepted;
import dev.bulletin.runtime.journal.JournalRecord.CallEnded;
import dev.bulletin.runtime.journal.JournalRecord.CallRequeued;
import dev.bulletin.runtime.journal.JournalRecord.CallStarted;
import dev.bulletin.runtime.journal.JournalRecord.SessionHold;
import dev.bulletin.runtime.journal.JournalRecord.SessionOpened;
import dev.bulletin.runtime.journal.JournalState;
import dev.bulletin.runtime.journal.JournalWriteException;
import dev.bulletin.runtime.journal.Journals;
import dev.bulletin.runtime.journal.StateJournal;
import java.io.IOException;
import java.lang.reflect.RecordComponent;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class KryoJournalTest {

  @TempDir Path home;

  private Path folder() {
    return home.resolve("journal");
  }

  static CallAccepted accepted(String taskId, String session) {
    return new CallAccepted(taskId, session, "train", "ada", "lab", 1, 2.5, 1L << 30,
        "ada/" + "f".repeat(32), "ada/" + "a".repeat(32), new String[] {"ada/" + "b".repeat(32)},
        30.0, "batch", 3, 1.5, 3_600_000, 2, 1_700_000_000_000L);
  }

  /** One record of every type, with every field set to something other than its default. */
  static List<JournalRecord> everyRecordType() {
    return List.of(
        new SessionOpened("s1", "ada", "lab", true, true, 42L),
        new JournalRecord.SessionSeq("s1", 20_000),
        new SessionHold("s1", "ada/" + "c".repeat(32), false, 1),
        new SessionHold("s1", "ada/" + "f".repeat(32), true, 1),
        accepted("t1", "s1"),
        new JournalRecord.CallGpuShare("t1", 4),
        new CallStarted("t1", "w-1", 1),
        new CallRequeued("t1", 1),
        new CallStarted("t1", "w-2", 2),
        accepted("t2", "s1"),
        new CallEnded("t2", "s1", new byte[] {1, 2, 3}),
        new JournalRecord.Ledger(
            new JournalRecord.GroupUsage[] {
                new JournalRecord.GroupUsage("lab", 12.5, 1000L, 0.25, 99_000L, 7.5)},
            new JournalRecord.UserUsage[] {new JournalRecord.UserUsage("ada", 3.5, 2000L)}),
        new JournalRecord.PoolWorker("gpu", "w-2", "slurm:17", true),
        new JournalRecord.ResultKept("ada/" + "c".repeat(32), "w-2", 3_200_000, "tensor"),
        new JournalRecord.ResidentSpill("ada/" + "d".repeat(32), "w-2", 4096, "pickle",
            new String[] {"e".repeat(32), "9".repeat(32)}, new String[] {"s1", ""}),
        new JournalRecord.ResidentSpillReleased("ada/" + "d".repeat(32), "w-2"),
        new JournalRecord.SessionOpened("s2", "bob", "", false, false, 43L),
        new JournalRecord.SessionClosed("s2"),
        new JournalRecord.SnapshotEnd(13));
  }

  private static Journals.Opened open(JournalOptions options) {
    return Journals.open(options);
  }

  @Test
  void everyRecordTypeRoundTripsFieldByField() throws IOException {
    Path file = home.resolve("log");
    Files.write(file, Frames.header(Frames.KIND_LOG).array());
    var kryo = KryoRegistry.newKryo();
    var scratch = new com.esotericsoftware.kryo.io.Output(64, -1);
    var out = new com.esotericsoftware.kryo.io.Output(64, -1);
    for (JournalRecord record : everyRecordType()) {
      Frames.encode(kryo, scratch, record, out);
    }
    Files.write(file, java.util.Arrays.copyOf(out.getBuffer(), out.position()),
        StandardOpenOption.APPEND);
    List<JournalRecord> back = new ArrayList<>();
    Frames.Read read = Frames.read(file, Frames.KIND_LOG, back::add);
    assertFalse(read.torn());
    assertEquals(everyRecordType().size(), back.size());
    for (int i = 0; i < back.size(); i++) {
      assertSameRecord(everyRecordType().get(i), back.get(i));
    }
  }

  /** Records holding arrays compare by identity: compare their components deeply instead. */
  static void assertSameRecord(Object expected, Object actual) {
    assertEquals(expected.getClass(), actual.getClass());
    if (!expected.getClass().isRecord()) {
      assertEquals(expected, actual);
      return;
    }
    for (RecordComponent component : expected.getClass().getRecordComponents()) {
      try {
        Object a = component.getAccessor().invoke(expected);
        Object b = component.getAccessor().invoke(actual);
        if (a instanceof Object[] arrayA) {
          Object[] arrayB = (Object[]) b;
          assertEquals(arrayA.length, arrayB.length, component.getName());
          for (int i = 0; i < arrayA.length; i++) {
            assertSameRecord(arrayA[i], arrayB[i]);
          }
        } else if (a instanceof byte[] bytes) {
          assertArrayEquals(bytes, (byte[]) b, component.getName());
        } else if (a != null && a.getClass().isRecord()) {
          assertSameRecord(a, b);
        } else {
          assertTrue(Objects.equals(a, b), component.getName() + ": " + a + " != " + b);
        }
      } catch (ReflectiveOperationException e) {
        throw new AssertionError(e);
      }
    }
  }

  @Test
  void stateIsRestoredAfterReopening() throws Exception {
    try (StateJournal journal = open(JournalOptions.in(folder())).journal()) {
      everyRecordType().forEach(journal::append);
      journal.sync(0).get(10, TimeUnit.SECONDS);
    }
    Journals.Opened reopened = open(JournalOptions.in(folder()));
    try (StateJournal ignored = reopened.journal()) {
      assertRestored(reopened.restored());
      assertEquals(everyRecordType().size(), reopened.records());
      assertEquals(0, reopened.droppedBytes());
    }
  }

  private static void assertRestored(JournalState state) {
    assertEquals(1, state.sessions().size(), "s2 was closed");
    JournalState.Session session = state.sessions().iterator().next();
    assertEquals("ada", session.opened().user());
    assertTrue(session.opened().owner());
    assertEquals(20_000, session.reservedSeq());
    assertEquals(1, session.holds().get("ada/" + "c".repeat(32)));
    assertTrue(session.functions().contains("ada/" + "f".repeat(32)));
    assertArrayEquals(new byte[] {1, 2, 3}, session.endedCalls().get("t2"));
    assertEquals(1, state.calls().size(), "t2 ended");
    JournalState.Call call = state.calls().iterator().next();
    assertSameRecord(accepted("t1", "s1"), call.accepted());
    assertEquals("w-2", call.runningOn());
    assertEquals(2, call.attempts());
    assertEquals(1, call.retriesLeft());
    assertEquals(4, call.gpuEighths(), "a share of a GPU survives a restart");
    assertEquals(7.5, state.ledger().groups()[0].credits());
    assertEquals(0.25, state.ledger().groups()[0].gpuHours());
    assertEquals("ada", state.ledger().users()[0].user());
    assertEquals("slurm:17", state.poolWorkers().iterator().next().handle());
  }

  /** Counts fsyncs. */
  private static FrameSink.Opener counting(AtomicInteger forces) {
    return file -> {
      FrameSink real = FrameSink.FILES.open(file);
      return new DelegatingSink(real) {
        @Override
        public void force() throws IOException {
          forces.incrementAndGet();
          super.force();
        }
      };
    };
  }

  @Test
  void manyRecordsShareOneFsync() throws Exception {
    AtomicInteger forces = new AtomicInteger();
    int calls = 5_000;
    List<java.util.concurrent.CompletableFuture<Void>> syncs = new ArrayList<>();
    try (StateJournal journal = open(JournalOptions.in(folder()).withSinks(counting(forces)))
        .journal()) {
      forces.set(0);
      journal.append(new SessionOpened("s1", "ada", "lab", false, false, 1));
      for (int i = 0; i < calls; i++) {
        long seq = journal.append(accepted("t" + i, "s1"));
        syncs.add(journal.sync(seq)); // one acknowledgement per call, as a Submit of one call
      }
      for (var sync : syncs) {
        sync.get(30, TimeUnit.SECONDS);
      }
    }
    assertTrue(forces.get() < calls / 2, "group commit: " + forces.get() + " fsyncs for "
        + calls + " acknowledged records");
    Journals.Opened reopened = open(JournalOptions.in(folder()));
    try (StateJournal ignored = reopened.journal()) {
      assertEquals(calls, reopened.restored().calls().size());
    }
  }

  @Test
  void writtenCompletesWithoutAnFsyncAndTheSyncStillWaitsForOne() throws Exception {
    HeldSyncs syncs = new HeldSyncs();
    JournalOptions options = JournalOptions.in(folder()).withSinks(syncs);
    try (StateJournal journal = open(options).journal()) {
      syncs.hold();
      int forcedBefore = syncs.completed();
      long seq = journal.append(new SessionOpened("s1", "ada", "lab", false, false, 1));
      journal.append(accepted("t1", "s1"));
      var durable = journal.sync(seq); // the writer thread now waits in its fsync
      journal.append(new CallStarted("t1", "w-1", 1));
      journal.written(seq).get(30, TimeUnit.SECONDS);
      assertFalse(durable.isDone(), "no fsync could complete: the sync must still wait");
      assertEquals(forcedBefore, syncs.completed());
      // Written is in the file (the kernel's cache), in order: a crash of this process now
      // loses none of the three. A copy of the folder reads as a restart would.
      Path copy = home.resolve("copy");
      Files.createDirectories(copy);
      try (Stream<Path> files = Files.list(folder())) {
        for (Path file : files.filter(f -> f.getFileName().toString().startsWith("log-"))
            .toList()) {
          Files.copy(file, copy.resolve(file.getFileName()));
        }
      }
      Journals.Opened fromCopy = open(JournalOptions.in(copy));
      try (StateJournal ignored = fromCopy.journal()) {
        JournalState.Call call = fromCopy.restored().calls().iterator().next();
        assertEquals("t1", call.accepted().taskId());
        assertEquals("w-1", call.runningOn());
        assertEquals(1, call.attempts());
      }
      syncs.release();
      durable.get(30, TimeUnit.SECONDS);
      journal.sync(seq).get(30, TimeUnit.SECONDS);
      assertTrue(syncs.completed() > forcedBefore);
    }
  }

  @Test
  void recordsNobodyWaitsForAreSyncedSoonAnyway() throws Exception {
    AtomicInteger forces = new AtomicInteger();
    try (StateJournal journal = open(JournalOptions.in(folder()).withSinks(counting(forces)))
        .journal()) {
      int before = forces.get();
      journal.append(new SessionOpened("s1", "ada", "lab", false, false, 1));
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      while (forces.get() == before && System.nanoTime() < deadline) {
        Thread.sleep(10);
      }
      assertTrue(forces.get() > before, "an unawaited record was never written and synced");
    }
  }

  @Test
  void compactionFoldsLogsIntoOneSnapshotAndKeepsTheState() throws Exception {
    JournalOptions options = JournalOptions.in(folder()).withCompactBytes(4096);
    try (StateJournal journal = open(options).journal()) {
      journal.append(new SessionOpened("s1", "ada", "lab", false, false, 1));
      for (int i = 0; i < 500; i++) {
        journal.append(accepted("t" + i, "s1"));
        if (i % 2 == 0) {
          journal.append(new CallEnded("t" + i, "s1", new byte[] {(byte) i}));
        }
        if (i % 50 == 0) {
          journal.sync(0).get(10, TimeUnit.SECONDS);
        }
      }
      journal.sync(0).get(10, TimeUnit.SECONDS);
    }
    List<String> names = names();
    assertEquals(1, names.stream().filter(n -> n.startsWith("snapshot-")).count(), names
        .toString());
    assertTrue(names.stream().filter(n -> n.startsWith("log-")).count() <= 2, names.toString());
    Journals.Opened reopened = open(options);
    try (StateJournal ignored = reopened.journal()) {
      JournalState state = reopened.restored();
      assertEquals(250, state.calls().size());
      assertEquals("t1", state.calls().iterator().next().accepted().taskId(), "submit order");
      assertEquals(250, state.sessions().iterator().next().endedCalls().size());
      assertTrue(reopened.records() < 1000, "read from a snapshot, not every record: "
          + reopened.records());
    }
  }

  private List<String> names() throws IOException {
    try (Stream<Path> files = Files.list(folder())) {
      return files.map(p -> p.getFileName().toString()).sorted().toList();
    }
  }

  private Path lastLogWithRecords() throws IOException {
    Path last = null;
    for (String name : names()) {
      if (name.startsWith("log-") && Files.size(folder().resolve(name)) > Frames.HEADER_BYTES) {
        last = folder().resolve(name);
      }
    }
    return last;
  }

  @Test
  void aTornTailIsDroppedAndTheRecordsBeforeItKept() throws Exception {
    try (StateJournal journal = open(JournalOptions.in(folder())).journal()) {
      journal.append(new SessionOpened("s1", "ada", "lab", false, false, 1));
      journal.append(accepted("t1", "s1"));
      journal.sync(0).get(10, TimeUnit.SECONDS);
      journal.append(accepted("t2", "s1"));
      journal.sync(0).get(10, TimeUnit.SECONDS);
    }
    Path log = lastLogWithRecords();
    long size = Files.size(log);
    // The crash came in the middle of t2's frame: cut it, and leave garbage where it ended.
    try (var channel = java.nio.channels.FileChannel.open(log, StandardOpenOption.WRITE)) {
      channel.truncate(size - 10);
      channel.write(ByteBuffer.wrap(new byte[] {9, 9, 9}), size - 10);
    }
    Journals.Opened reopened = open(JournalOptions.in(folder()));
    try (StateJournal journal = reopened.journal()) {
      assertEquals(List.of("t1"), reopened.restored().calls().stream()
          .map(c -> c.accepted().taskId()).toList());
      assertTrue(reopened.droppedBytes() > 0);
      journal.append(accepted("t3", "s1"));
      journal.sync(0).get(10, TimeUnit.SECONDS);
    }
    Journals.Opened again = open(JournalOptions.in(folder()));
    try (StateJournal ignored = again.journal()) {
      assertEquals(List.of("t1", "t3"), again.restored().calls().stream()
          .map(c -> c.accepted().taskId()).toList());
      assertEquals(0, again.droppedBytes(), "the torn tail was cut off the file");
    }
  }

  @Test
  void aFlippedBitIsCaughtByTheChecksum() throws Exception {
    try (StateJournal journal = open(JournalOptions.in(folder())).journal()) {
      journal.append(new SessionOpened("s1", "ada", "lab", false, false, 1));
      journal.append(accepted("t1", "s1"));
      journal.sync(0).get(10, TimeUnit.SECONDS);
    }
    Path log = lastLogWithRecords();
    byte[] bytes = Files.readAllBytes(log);
    bytes[bytes.length - 5] ^= 0x10;
    Files.write(log, bytes);
    Journals.Opened reopened = open(JournalOptions.in(folder()));
    try (StateJournal ignored = reopened.journal()) {
      assertEquals(1, reopened.restored().sessions().size());
      assertEquals(0, reopened.restored().calls().size());
      assertTrue(reopened.droppedBytes() > 0);
    }
  }

  @Test
  void aKillDuringASnapshotLeavesTheOlderSnapshotAndLogsInCharge() throws Exception {
    JournalOptions options = JournalOptions.in(folder()).withCompactBytes(2048);
    try (StateJournal journal = open(options).journal()) {
      journal.append(new SessionOpened("s1", "ada", "lab", false, false, 1));
      for (int i = 0; i < 100; i++) {
        journal.append(accepted("t" + i, "s1"));
        journal.sync(0).get(10, TimeUnit.SECONDS);
      }
    }
    // What a SIGKILL in the middle of the next compaction leaves: a new, empty log, and half a
    // snapshot under its temporary name (a snapshot gets its real name only once complete).
    List<String> before = names();
    long lastLog = before.stream().filter(n -> n.startsWith("log-"))
        .mapToLong(n -> Long.parseLong(n.substring(4))).max().orElseThrow();
    JournalFiles files = new JournalFiles(folder());
    Files.write(files.log(lastLog + 1), Frames.header(Frames.KIND_LOG).array());
    byte[] snapshot = Files.readAllBytes(files.snapshot(before.stream()
        .filter(n -> n.startsWith("snapshot-")).mapToLong(n -> Long.parseLong(n.substring(9)))
        .max().orElseThrow()));
    Files.write(files.snapshotTemp(lastLog + 1),
        java.util.Arrays.copyOf(snapshot, snapshot.length / 2));
    Journals.Opened reopened = open(options);
    try (StateJournal ignored = reopened.journal()) {
      assertEquals(100, reopened.restored().calls().size());
    }
    assertTrue(names().stream().noneMatch(n -> n.endsWith(".tmp")), names().toString());
  }

  @Test
  void logsASnapshotAlreadyCoversAreNotAppliedTwice() throws Exception {
    // A kill after a snapshot's rename, before the older logs were deleted.
    JournalOptions options = JournalOptions.in(folder()).withCompactBytes(1 << 20);
    try (StateJournal journal = open(options).journal()) {
      journal.append(new SessionOpened("s1", "ada", "lab", false, false, 1));
      journal.append(new SessionHold("s1", "ada/" + "c".repeat(32), false, 1));
      journal.sync(0).get(10, TimeUnit.SECONDS);
    }
    Path oldLog = lastLogWithRecords();
    byte[] oldBytes = Files.readAllBytes(oldLog);
    JournalOptions compactNow = options.withCompactBytes(1);
    try (StateJournal journal = open(compactNow).journal()) {
      journal.append(new SessionHold("s1", "ada/" + "d".repeat(32), false, 1));
      journal.sync(0).get(10, TimeUnit.SECONDS);
    }
    Files.write(oldLog, oldBytes); // the old log is back, as if its deletion never happened
    Journals.Opened reopened = open(options);
    try (StateJournal ignored = reopened.journal()) {
      JournalState.Session session = reopened.restored().sessions().iterator().next();
      assertEquals(1, session.holds().get("ada/" + "c".repeat(32)));
      assertEquals(1, session.holds().get("ada/" + "d".repeat(32)));
    }
  }

  @Test
  void aJournalOfANewerOrOlderFormatIsRefusedWithWhatToDo() throws Exception {
    Files.createDirectories(folder());
    JournalFiles files = new JournalFiles(folder());
    for (int format : new int[] {Frames.FORMAT + 1, Frames.FORMAT - 1}) {
      Files.write(files.log(1), ByteBuffer.allocate(Frames.HEADER_BYTES).putInt(Frames.MAGIC)
          .putInt(format).putInt(Frames.KIND_LOG).array());
      JournalException refused = assertThrows(JournalException.class,
          () -> open(JournalOptions.in(folder())));
      assertTrue(refused.getMessage().contains("format " + format), refused.getMessage());
      assertTrue(refused.getMessage().contains(format > Frames.FORMAT ? "newer" : "older"),
          refused.getMessage());
      assertTrue(refused.getMessage().contains("move the folder " + folder()),
          refused.getMessage());
    }
  }

  @Test
  void oneRuntimePerJournal() {
    try (StateJournal first = open(JournalOptions.in(folder())).journal()) {
      JournalException refused = assertThrows(JournalException.class,
          () -> open(JournalOptions.in(folder())));
      assertTrue(refused.getMessage().contains("in use by another bulletin runtime (pid "),
          refused.getMessage());
    }
  }

  /** A sink that fails as a full disk does, past a byte budget: a simulated ENOSPC. */
  private static FrameSink.Opener simulatedFullDisk(AtomicLong budget) {
    return file -> new DelegatingSink(FrameSink.FILES.open(file)) {
      @Override
      public void write(ByteBuffer bytes) throws IOException {
        if (budget.addAndGet(-bytes.remaining()) < 0) {
          // Half the batch reaches the file, as a real ENOSPC mid-write leaves it.
          ByteBuffer half = bytes.duplicate();
          half.limit(half.position() + half.remaining() / 2);
          super.write(half);
          throw new IOException("No space left on device (simulated ENOSPC)");
        }
        super.write(bytes);
      }
    };
  }

  @Test
  void aFullDiskFailsTheSyncWithTheFolderAndCauseThenRecovers() throws Exception {
    AtomicLong budget = new AtomicLong(1 << 20);
    JournalOptions options = JournalOptions.in(folder()).withSinks(simulatedFullDisk(budget));
    try (StateJournal journal = open(options).journal()) {
      journal.append(new SessionOpened("s1", "ada", "lab", false, false, 1));
      journal.append(accepted("t1", "s1"));
      journal.sync(0).get(10, TimeUnit.SECONDS);
      assertNull(journal.failure());
      budget.set(0);
      long seq = journal.append(accepted("t2", "s1"));
      ExecutionException failed = assertThrows(ExecutionException.class,
          () -> journal.sync(seq).get(10, TimeUnit.SECONDS));
      assertTrue(failed.getCause() instanceof JournalWriteException);
      String message = failed.getCause().getMessage();
      assertTrue(message.contains(folder().toString()) && message.contains("No space left"),
          message);
      assertNotNull(journal.failure());
      // The written mark fails alike: nothing it waited for reached the file.
      ExecutionException notWritten = assertThrows(ExecutionException.class,
          () -> journal.written(seq).get(10, TimeUnit.SECONDS));
      assertEquals(message, notWritten.getCause().getMessage());
      budget.set(1 << 20); // space was freed
      long next = journal.append(accepted("t3", "s1"));
      journal.sync(next).get(10, TimeUnit.SECONDS);
      assertNull(journal.failure());
      // A sync that covers the lost record still says so.
      assertThrows(ExecutionException.class, () -> journal.sync(seq).get(10, TimeUnit.SECONDS));
    }
    Journals.Opened reopened = open(JournalOptions.in(folder()));
    try (StateJournal ignored = reopened.journal()) {
      assertEquals(List.of("t1", "t3"), reopened.restored().calls().stream()
          .map(c -> c.accepted().taskId()).toList());
      assertEquals(0, reopened.droppedBytes(), "the half-written batch was cut off");
    }
  }

  @Test
  void aFullTmpfsFailsTheSyncWithTheFolderAndCause() throws Exception {
    Path mount = home.resolve("small");
    Files.createDirectories(mount);
    boolean mounted = new ProcessBuilder("mount", "-t", "tmpfs", "-o", "size=128k", "tmpfs",
        mount.toString()).redirectErrorStream(true).start().waitFor() == 0;
    org.junit.jupiter.api.Assumptions.assumeTrue(mounted,
        "cannot mount a tmpfs here (not root): the simulated ENOSPC test covers this");
    try {
      Path folder = mount.resolve("journal");
      try (StateJournal journal = open(JournalOptions.in(folder)).journal()) {
        journal.append(new SessionOpened("s1", "ada", "lab", false, false, 1));
        JournalWriteException failure = null;
        for (int i = 0; i < 64 && failure == null; i++) {
          long seq = journal.append(new CallEnded("t" + i, "s1", new byte[16 << 10]));
          try {
            journal.sync(seq).get(10, TimeUnit.SECONDS);
          } catch (ExecutionException e) {
            failure = (JournalWriteException) e.getCause();
          }
        }
        assertNotNull(failure, "128 KiB cannot hold 1 MiB of records");
        assertTrue(failure.getMessage().contains(folder.toString())
            && failure.getMessage().contains("No space left on device"), failure.getMessage());
      }
    } finally {
      new ProcessBuilder("umount", mount.toString()).start().waitFor();
    }
  }
}
