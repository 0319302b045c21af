package dev.bulletin.runtime.control;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.bridge.ObjectStores;
import dev.bulletin.runtime.api.SessionRegistry;
import dev.bulletin.runtime.journal.JournalOptions;
import dev.bulletin.runtime.journal.JournalRecord;
import dev.bulletin.runtime.journal.JournalState;
import dev.bulletin.runtime.journal.Journals;
import dev.bulletin.runtime.journal.impl.HeldSyncs;
import dev.bulletin.runtime.scheduler.WorkerSlots;
import dev.bulletin.runtime.scheduler.policy.PolicyConfig;
import dev.bulletin.runtime.workers.AttachedWorker;
import dev.bulletin.runtime.workers.WorkerLink;
import dev.bulletin.worker.CallListener;
import dev.bulletin.worker.CallOutcome;
import dev.bulletin.worker.CallRequest;
import dev.bulletin.worker.WorkerStatusView;
import io.vertx.core.Context;
import io.vertx.core.Vertx;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * When a placed call may be sent to its worker (docs/durability.md, "Written and durable"): to
 * the embedded worker once its new attempt is written into the journal's file, without waiting
 * for an fsync; to a remote worker, which outlives a power loss of the head, only once the
 * attempt is synced. A real control plane and a real journal whose fsyncs the test holds back;
 * workers at the link seam.
 */
class JournaledDispatchTest {
  private static final String USER = "alice";
  private static final ObjectKey FUNCTION = ObjectKey.of(USER, "f".repeat(32));
  private static final ObjectKey ARGS = ObjectKey.of(USER, "a".repeat(32));

  @TempDir Path folder;
  private Vertx vertx;
  private Context context;
  private ObjectStore store;
  private ControlPlane plane;
  private Journals.Opened journal;
  private final HeldSyncs syncs = new HeldSyncs();

  /**
   * A worker that records the calls it is sent and, at that moment, what a restart would read
   * from the journal's files (a crash of the runtime's process loses nothing written).
   */
  private final class Recorder implements WorkerLink {
    final List<String> runs = new CopyOnWriteArrayList<>();
    final List<JournalState.Call> journaledAtRun = new CopyOnWriteArrayList<>();

    @Override
    public CompletableFuture<CallOutcome> run(CallRequest request, CallListener listener) {
      journaledAtRun.add(readCopy().calls().iterator().next());
      runs.add(request.taskId());
      return new CompletableFuture<>();
    }

    @Override public CompletableFuture<CallOutcome> adopt(String taskId, String namespace,
        CallListener listener) {
      return new CompletableFuture<>();
    }

    @Override public void sendObject(ObjectKey key) { }
    @Override public void stop(String taskId, String reason) { }
    @Override public WorkerStatusView status() { return new WorkerStatusView(0, 0, 0); }
    @Override public void preempt(String taskId, String reason, Duration grace) { }
  }

  @BeforeEach
  void setUp() throws Exception {
    vertx = Vertx.vertx();
    context = vertx.getOrCreateContext();
    store = ObjectStores.inFolder(folder.resolve("store"));
    store.put(FUNCTION, ByteBuffer.wrap(new byte[] {1}));
    store.put(ARGS, ByteBuffer.wrap(new byte[] {2}));
    // A call accepted by an earlier run, queued, not started: the restore queues it again.
    JournalOptions options = JournalOptions.in(folder.resolve("journal")).withSinks(syncs);
    try (var first = Journals.open(options).journal()) {
      first.append(new JournalRecord.SessionOpened("session-1", USER, "lab", false, false, 0));
      first.append(new JournalRecord.SessionSeq("session-1", 10_000));
      first.append(new JournalRecord.CallAccepted("t1", "session-1", "train", USER, "lab", 0, 1,
          0, FUNCTION.toString(), ARGS.toString(), new String[0], 0,
          PolicyConfig.defaults().defaultQos(), 0, 0, 3_600_000, 0, System.currentTimeMillis()));
      first.sync(0).get(30, TimeUnit.SECONDS);
    }
    journal = Journals.open(options);
    onLoop(() -> {
      plane = new ControlPlane(context, store, new PolicyPass(PolicyConfig.defaults(),
          Clock.systemUTC(), Duration.ofSeconds(60), 1), 1 << 20, 60, Map.of(),
          new Journaling(journal.journal()));
      JournalRestore.restore(journal.restored(), plane,
          new SessionRegistry(vertx, plane, Duration.ofMinutes(3)), Duration.ofMinutes(1),
          "embedded");
      return null;
    });
    plane.journaling().durable(0).get(30, TimeUnit.SECONDS); // the restore's own records
  }

  @AfterEach
  void tearDown() {
    syncs.release();
    vertx.close().await();
    journal.journal().close();
    store.close();
  }

  private <T> T onLoop(Callable<T> action) throws Exception {
    return OnLoop.call(context, action);
  }

  /** The journal as a restart after a crash of this process would read it: its files now. */
  private JournalState readCopy() {
    Path copy = folder.resolve("copy-" + System.nanoTime());
    try (Stream<Path> files = Files.list(folder.resolve("journal"))) {
      Files.createDirectories(copy);
      for (Path file : files.filter(f -> !f.getFileName().toString().equals("lock")).toList()) {
        Files.copy(file, copy.resolve(file.getFileName()));
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    Journals.Opened read = Journals.open(JournalOptions.in(copy));
    read.journal().close();
    return read.restored();
  }

  private void attach(String workerId, boolean remote, Recorder link) throws Exception {
    onLoop(() -> {
      plane.attach(new AttachedWorker(workerId, "host", "", List.of(), remote, 0, "",
          new WorkerSlots(workerId, 0, true, 2, 0), link, ""));
      return null;
    });
  }

  private static void eventually(Callable<Boolean> condition, String what) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (!condition.call()) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError(what + " did not happen within 30 s");
      }
      Thread.sleep(10);
    }
  }

  @Test
  void aCallGoesToTheEmbeddedWorkerOnceItsAttemptIsWrittenWithoutWaitingForAnFsync()
      throws Exception {
    syncs.hold();
    int synced = syncs.completed();
    Recorder embedded = new Recorder();
    attach("embedded", false, embedded);
    eventually(() -> embedded.runs.contains("t1"), "the call's dispatch to the embedded worker");
    assertEquals(synced, syncs.completed(), "it was sent while no fsync could complete");
    JournalState.Call journaled = embedded.journaledAtRun.get(0);
    assertEquals("embedded", journaled.runningOn(),
        "its attempt was in the journal's file before the worker heard of it");
    assertEquals(1, journaled.attempts());
    syncs.release();
    plane.journaling().durable(0).get(30, TimeUnit.SECONDS);
  }

  @Test
  void aCallGoesToARemoteWorkerOnlyOnceItsAttemptIsSynced() throws Exception {
    syncs.hold();
    Recorder remote = new Recorder();
    attach("w-remote", true, remote);
    // The attempt is written (a crash of the process would count it) and its fsync held.
    eventually(() -> !readCopy().calls().isEmpty()
        && "w-remote".equals(readCopy().calls().iterator().next().runningOn())
        && syncs.waiting() > 0, "the attempt's write and fsync");
    assertEquals(List.of(), remote.runs, "sent to a remote worker before its attempt was synced");
    int synced = syncs.completed();
    syncs.release();
    eventually(() -> remote.runs.contains("t1"), "the call's dispatch once synced");
    assertTrue(syncs.completed() > synced);
    assertEquals("w-remote", remote.journaledAtRun.get(0).runningOn());
  }
}
