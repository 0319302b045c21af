package dev.bulletin.runtime.control;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.bridge.ObjectStores;
import dev.bulletin.protocol.TaskEvent;
import dev.bulletin.runtime.api.SessionRegistry;
import dev.bulletin.runtime.journal.JournalRecord;
import dev.bulletin.runtime.journal.JournalState;
import dev.bulletin.runtime.journal.StateJournal;
import dev.bulletin.runtime.scheduler.Demand;
import dev.bulletin.runtime.scheduler.WorkerSlots;
import dev.bulletin.runtime.scheduler.policy.PolicyConfig;
import dev.bulletin.runtime.task.Task;
import dev.bulletin.runtime.task.TaskState;
import dev.bulletin.runtime.task.TaskTable;
import dev.bulletin.runtime.workers.AttachedWorker;
import dev.bulletin.runtime.workers.WorkerLink;
import dev.bulletin.worker.CallListener;
import dev.bulletin.worker.CallOutcome;
import dev.bulletin.worker.CallRequest;
import dev.bulletin.worker.WorkerStatusView;
import io.vertx.core.Context;
import io.vertx.core.Vertx;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The restore's decision for a call that was running on a remote worker when the runtime died
 * (docs/durability.md, "Remote workers across a restart"): it waits for that worker; the
 * worker's reattach adopts it (its GPU reserved again, its outcome reported, never run twice);
 * a reattach without it, or the grace passing, queues it again one attempt later; another
 * worker reporting it cannot adopt it. A real control plane on a Vert.x loop, restored from
 * journal records; workers at the link seam.
 */
class RestoredRemoteWorkTest {
  private static final String USER = "alice";
  private static final ObjectKey FUNCTION = ObjectKey.of(USER, "f".repeat(32));
  private static final ObjectKey ARGS = ObjectKey.of(USER, "a".repeat(32));
  private static final ObjectKey RESULT = ObjectKey.of(USER, "b".repeat(32));
  /** A result only the remote worker's store kept, held by the session. */
  private static final ObjectKey KEPT = ObjectKey.of(USER, "c".repeat(32));

  /** A worker that records the calls it is asked to run and those it is asked to adopt. */
  private static final class Link implements WorkerLink {
    final List<String> runs = new CopyOnWriteArrayList<>();
    final Map<String, CompletableFuture<CallOutcome>> adopted =
        new java.util.concurrent.ConcurrentHashMap<>();
    final List<ObjectKey> sent = new CopyOnWriteArrayList<>();

    @Override
    public void sendObject(ObjectKey key) {
      sent.add(key);
    }

    @Override
    public CompletableFuture<CallOutcome> run(CallRequest request, CallListener listener) {
      runs.add(request.taskId());
      return new CompletableFuture<>();
    }

    @Override
    public CompletableFuture<CallOutcome> adopt(String taskId, String namespace,
        CallListener listener) {
      CompletableFuture<CallOutcome> outcome = new CompletableFuture<>();
      adopted.put(taskId, outcome);
      return outcome;
    }

    @Override public void stop(String taskId, String reason) { }
    @Override public WorkerStatusView status() { return new WorkerStatusView(0, 0, 0); }
    @Override public void preempt(String taskId, String reason, Duration grace) { }
  }

  @TempDir Path folder;
  private Vertx vertx;
  private Context context;
  private ObjectStore store;
  private ControlPlane plane;
  private SessionRegistry sessions;
  /** Every event the restored call's session was told, in order. */
  private final List<TaskEvent> told = new CopyOnWriteArrayList<>();

  @BeforeEach
  void setUp() {
    vertx = Vertx.vertx();
    context = vertx.getOrCreateContext();
    store = ObjectStores.inFolder(folder.resolve("store"));
    store.put(FUNCTION, ByteBuffer.wrap(new byte[] {1}));
    store.put(ARGS, ByteBuffer.wrap(new byte[] {2}));
    store.put(RESULT, ByteBuffer.wrap(new byte[] {3, 4}));
  }

  @AfterEach
  void tearDown() {
    vertx.close().await();
    store.close();
  }

  private <T> T onLoop(Callable<T> action) throws Exception {
    return OnLoop.call(context, action);
  }

  /** A new runtime restored from a journal in which t1 (1 GPU) started on {@code workerId}. */
  private void restore(String workerId, Duration grace) throws Exception {
    restore(workerId, grace, List.of());
  }

  private void restore(String workerId, Duration grace, List<JournalRecord> more)
      throws Exception {
    JournalState state = new JournalState();
    state.apply(new JournalRecord.SessionOpened("session-1", USER, "lab", false, false, 0));
    state.apply(new JournalRecord.SessionSeq("session-1", 10_000));
    state.apply(new JournalRecord.CallAccepted("t1", "session-1", "train", USER, "lab", 1, 1, 0,
        FUNCTION.toString(), ARGS.toString(), new String[0], 0,
        PolicyConfig.defaults().defaultQos(), 0, 0, 3_600_000, 0, System.currentTimeMillis()));
    state.apply(new JournalRecord.CallStarted("t1", workerId, 1));
    state.apply(new JournalRecord.ResultKept(KEPT.toString(), workerId, 3_200_000, "tensor"));
    state.apply(new JournalRecord.SessionHold("session-1", KEPT.toString(), false, 1));
    more.forEach(state::apply);
    onLoop(() -> {
      plane = new ControlPlane(context, store, new PolicyPass(PolicyConfig.defaults(),
          Clock.systemUTC(), Duration.ofSeconds(60), 1), 1 << 20, 60, Map.of(),
          new Journaling(StateJournal.disabled()));
      plane.tasks().listen(new TaskTable.Listener() {
        @Override
        public void told(Task task, TaskState to, TaskEvent event) {
          if (event != null) {
            told.add(event);
          }
        }
      });
      sessions = new SessionRegistry(vertx, plane, Duration.ofMinutes(3));
      JournalRestore.restore(state, plane, sessions, grace, "local");
      return null;
    });
  }

  private AttachedWorker worker(String id, Link link) {
    return new AttachedWorker(id, id + ".lab", "", List.of("GPU", "GPU"), true, 0, "",
        new WorkerSlots(id, 2, true, 4, 0), link, "");
  }

  private TaskState state() throws Exception {
    return onLoop(() -> plane.tasks().get("t1").map(Task::state).orElse(null));
  }

  private static void eventually(Callable<Boolean> condition) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (!condition.call()) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("condition not met within 20 s");
      }
      Thread.sleep(20);
    }
  }

  @Test
  void aReattachThatReportsTheCallAdoptsItAndItsOutcomeReachesTheClient() throws Exception {
    restore("w-remote", Duration.ofMinutes(1));
    Link other = new Link();
    onLoop(() -> plane.attach(worker("w-other", other)));
    Thread.sleep(200); // a scheduling pass had its chance: the waiting call is not run again
    assertEquals(TaskState.PLACED, state());
    assertEquals(List.of(), other.runs);

    Link remote = new Link();
    AttachedWorker back = worker("w-remote", remote);
    List<String> stop = onLoop(() -> {
      List<String> answer = plane.restoredRemoteWork().registered(back, true,
          Map.of("t1", List.of(1)), Set.of("t1"), Set.of());
      plane.attach(back);
      return answer;
    });
    assertEquals(List.of(), stop);
    assertEquals(TaskState.RUNNING, state());
    assertEquals(0, onLoop(() -> plane.restoredRemoteWork().waitingCount()));
    // Its GPU is reserved again: nothing else can take GPU 1 there.
    var refused = assertThrows(java.util.concurrent.ExecutionException.class, () -> onLoop(() -> {
      back.reserve("t2", new Demand(1, 1, 0), List.of(1));
      return null;
    }));
    assertTrue(refused.getCause() instanceof IllegalStateException, refused.toString());

    remote.adopted.get("t1").complete(new CallOutcome.Returned(RESULT, 2, false, 1.5));
    eventually(() -> state() == null);
    TaskEvent end = told.get(told.size() - 1);
    assertEquals("t1", end.getTaskId());
    assertEquals(dev.bulletin.protocol.TaskState.FINISHED, end.getState());
    assertEquals(1, end.getAttempt(), "the run that started before the restart, not a second");
    assertEquals(List.of(), remote.runs);
    assertEquals(List.of(), other.runs);
    // Its GPU went back once it ended.
    onLoop(() -> {
      back.reserve("t2", new Demand(1, 1, 0), List.of(1));
      return null;
    });
  }

  @Test
  void theCallRunsAgainWhenItsWorkerDoesNotReattachWithinTheGrace() throws Exception {
    restore("w-remote", Duration.ofMillis(300));
    Link other = new Link();
    onLoop(() -> plane.attach(worker("w-other", other)));
    assertEquals(TaskState.PLACED, state());
    eventually(() -> other.runs.contains("t1"));
    assertEquals(0, onLoop(() -> plane.restoredRemoteWork().waitingCount()));
    assertTrue(told.stream().anyMatch(event -> event.getState()
        == dev.bulletin.protocol.TaskState.QUEUED), "its client hears it is queued again");
    // Too late: the worker reattaching now is told to stop it.
    Link remote = new Link();
    List<String> stop = onLoop(() -> plane.restoredRemoteWork().registered(
        worker("w-remote", remote), true, Map.of("t1", List.of(0)), Set.of("t1"), Set.of()));
    assertEquals(List.of("t1"), stop);
    assertEquals(Map.of(), remote.adopted);
  }

  @Test
  void theCallRunsAgainWhenItsWorkerReattachesWithoutIt() throws Exception {
    restore("w-remote", Duration.ofMinutes(1));
    Link remote = new Link();
    List<String> stop = onLoop(() -> {
      AttachedWorker back = worker("w-remote", remote);
      List<String> answer = plane.restoredRemoteWork().registered(back, true, Map.of(),
          Set.of(), Set.of());
      plane.attach(back);
      return answer;
    });
    assertEquals(List.of(), stop);
    eventually(() -> remote.runs.contains("t1"));
    assertEquals(Map.of(), remote.adopted);
  }

  @Test
  void anotherWorkerReportingTheCallCannotAdoptIt() throws Exception {
    restore("w-remote", Duration.ofMinutes(1));
    Link intruder = new Link();
    List<String> stop = onLoop(() -> {
      AttachedWorker other = worker("w-intruder", intruder);
      List<String> answer = plane.restoredRemoteWork().registered(other, true,
          Map.of("t1", List.of(0)), Set.of("t1"), Set.of());
      plane.attach(other);
      return answer;
    });
    assertEquals(List.of("t1"), stop, "told to stop a call that is not its own");
    assertEquals(Map.of(), intruder.adopted);
    Thread.sleep(200);
    assertEquals(TaskState.PLACED, state(), "the call still waits for its own worker");
    assertEquals(List.of(), intruder.runs);

    // The same worker id registering anew (a restarted worker) does not adopt it either.
    Link restarted = new Link();
    List<String> none = onLoop(() -> {
      AttachedWorker fresh = worker("w-remote", restarted);
      List<String> answer = plane.restoredRemoteWork().registered(fresh, false, Map.of(),
          Set.of(), Set.of());
      plane.attach(fresh);
      return answer;
    });
    assertEquals(List.of(), none);
    assertEquals(Map.of(), restarted.adopted);
    eventually(() -> intruder.runs.contains("t1") || restarted.runs.contains("t1"));
  }

  @Test
  void aCallCancelledWhileItsWorkerIsAwayEndsAndIsStoppedOnReattach() throws Exception {
    restore("w-remote", Duration.ofMinutes(1));
    boolean cancelled = onLoop(() -> plane.cancel(
        (dev.bulletin.runtime.api.ClientSession) plane.tasks().get("t1").orElseThrow().sink(),
        "t1"));
    assertTrue(cancelled);
    assertEquals(null, state());
    assertEquals(dev.bulletin.protocol.TaskState.CANCELLED, told.get(told.size() - 1).getState());
    List<String> stop = onLoop(() -> plane.restoredRemoteWork().registered(
        worker("w-remote", new Link()), true, Map.of("t1", List.of(0)), Set.of("t1"),
        Set.of()));
    assertEquals(List.of("t1"), stop);
  }

  @Test
  void withoutAGraceTheCallRunsAgainAtOnce() throws Exception {
    restore("w-remote", Duration.ZERO);
    assertEquals(0, onLoop(() -> plane.restoredRemoteWork().waitingCount()));
    Link other = new Link();
    onLoop(() -> plane.attach(worker("w-other", other)));
    eventually(() -> other.runs.contains("t1"));
  }

  /** Fetches the kept result to the runtime's store, as a download does; its failure or null. */
  private CompletableFuture<Throwable> fetchKept() throws Exception {
    CompletableFuture<Throwable> done = new CompletableFuture<>();
    onLoop(() -> plane.objects().toHead(KEPT).onComplete(pulled ->
        done.complete(pulled.failed() ? pulled.cause() : null)));
    return done;
  }

  @Test
  void aHeldResultKeptOnTheWorkerIsFetchedFromItOnceItReattachesWithIt() throws Exception {
    restore("w-remote", Duration.ofMinutes(1));
    assertEquals(3_200_000L, onLoop(() -> plane.objects().size(KEPT)),
        "the session's hold survived the restart, with where the result lives");
    CompletableFuture<Throwable> fetch = fetchKept();
    Thread.sleep(100);
    assertTrue(!fetch.isDone(), "a fetch waits for the worker that keeps it");
    Link remote = new Link();
    onLoop(() -> plane.restoredRemoteWork().registered(worker("w-remote", remote), true,
        Map.of("t1", List.of(0)), Set.of("t1"), Set.of(KEPT)));
    assertEquals(List.of(KEPT), remote.sent, "the reattached worker is asked for it");
    assertTrue(onLoop(() -> plane.objects().keptOn("w-remote", KEPT)));
    // Its upload lands in the store: the fetch completes.
    store.put(KEPT, ByteBuffer.wrap(new byte[] {9}));
    onLoop(() -> {
      plane.objects().arrived(KEPT);
      return null;
    });
    assertEquals(null, fetch.get(10, TimeUnit.SECONDS));
  }

  @Test
  void aHeldResultTheWorkerNoLongerHasIsLostClearly() throws Exception {
    restore("w-remote", Duration.ofMinutes(1));
    CompletableFuture<Throwable> fetch = fetchKept();
    onLoop(() -> plane.restoredRemoteWork().registered(worker("w-remote", new Link()), true,
        Map.of(), Set.of(), Set.of()));
    Throwable lost = fetch.get(10, TimeUnit.SECONDS);
    assertTrue(lost instanceof dev.bulletin.runtime.objects.ObjectDirectory.ObjectLostException,
        String.valueOf(lost));
    assertTrue(lost.getMessage().contains("w-remote, which reattached without it"),
        lost.getMessage());
  }

  @Test
  void aHeldResultIsLostWhenItsWorkerDoesNotReattachWithinTheGrace() throws Exception {
    restore("w-remote", Duration.ofMillis(300));
    Throwable lost = fetchKept().get(10, TimeUnit.SECONDS);
    assertTrue(lost != null && lost.getMessage().contains("did not reattach within"),
        String.valueOf(lost));
    // Another worker claiming it afterwards changes nothing.
    onLoop(() -> plane.restoredRemoteWork().registered(worker("w-intruder", new Link()), true,
        Map.of(), Set.of(), Set.of(KEPT)));
    assertTrue(fetchKept().get(10, TimeUnit.SECONDS) != null);
  }

  @Test
  void aQueuedCallOnlyARemoteWorkerCanRunWaitsForAWorkerThatCanEvenPastTheGrace()
      throws Exception {
    restore("w-remote", Duration.ofMillis(1500), List.of(new JournalRecord.CallAccepted("t2",
        "session-1", "train", USER, "lab", 1, 1, 0, FUNCTION.toString(), ARGS.toString(),
        new String[0], 0, PolicyConfig.defaults().defaultQos(), 0, 0, 3_600_000, 0,
        System.currentTimeMillis())));
    Link cpuOnly = new Link();
    onLoop(() -> plane.attach(new AttachedWorker("embedded", "here", "", List.of(), false, 0,
        "", new WorkerSlots("embedded", 0, true, 4, 0), cpuOnly, "")));
    Thread.sleep(300);
    assertEquals(TaskState.QUEUED,
        onLoop(() -> plane.tasks().get("t2").map(Task::state).orElse(null)),
        "no GPU worker attached yet, but one may reattach: it waits");
    // No worker came back within the grace: it was accepted when one could run it, so it
    // still waits (a worker that can may join: a pool's, or the same one restarted), and says
    // why, rather than failing as if it never could.
    Thread.sleep(1800); // past the grace
    eventually(() -> onLoop(() -> plane.tasks().get("t2").map(Task::waitInfo)
        .filter(wait -> wait.code() == dev.bulletin.runtime.scheduler.plan.WaitCode.NO_WORKERS
            && wait.reason().contains("waits for a worker that can to join")).isPresent()));
    assertEquals(TaskState.QUEUED,
        onLoop(() -> plane.tasks().get("t2").map(Task::state).orElse(null)));
    assertTrue(told.stream().noneMatch(event -> event.getTaskId().equals("t2")
        && event.getState() == dev.bulletin.protocol.TaskState.ERROR));
    onLoop(() -> plane.attach(worker("w-new", new Link())));
    eventually(() -> onLoop(() -> plane.tasks().get("t2").map(Task::state).orElse(null))
        != TaskState.QUEUED);
  }

  @Test
  void aCallSubmittedWhileWorkersReattachWaitsThenFailsIfNoneThatCanRunItCame()
      throws Exception {
    restore("w-remote", Duration.ofMillis(1500));
    onLoop(() -> plane.attach(new AttachedWorker("embedded", "here", "", List.of(), false, 0,
        "", new WorkerSlots("embedded", 0, true, 4, 0), new Link(), "")));
    // Its client is back before the GPU worker: at submit, no attached worker could run it.
    onLoop(() -> {
      plane.submit(sessions.find("session-1").orElseThrow(), List.of(dev.bulletin.protocol.TaskSpec
          .newBuilder().setTaskId("t3").setName("train")
          .setFunction(dev.bulletin.protocol.ObjectRef.newBuilder()
              .setId(FUNCTION.id().toString()).setSize(1))
          .setArgs(dev.bulletin.protocol.ObjectRef.newBuilder().setId(ARGS.id().toString())
              .setSize(1))
          .setResources(dev.bulletin.protocol.Resources.newBuilder().setGpus(1).setCpus(1))
          .build()));
      return null;
    });
    assertEquals(TaskState.QUEUED,
        onLoop(() -> plane.tasks().get("t3").map(Task::state).orElse(null)),
        "a worker that can run it may still reattach: it waits");
    // None came within the grace: now it is what it is at any other time, a call no worker
    // of this cluster can run.
    eventually(() -> told.stream().anyMatch(event -> event.getTaskId().equals("t3")
        && event.getState() == dev.bulletin.protocol.TaskState.ERROR
        && event.getFailure().getMessage().contains("no worker can run")));
  }

  @Test
  void aCancelledCallLeavesTheWaitForItsWorkersHeldResultsRunning() throws Exception {
    restore("w-remote", Duration.ofMillis(500));
    onLoop(() -> plane.cancel(
        (dev.bulletin.runtime.api.ClientSession) plane.tasks().get("t1").orElseThrow().sink(),
        "t1"));
    Throwable lost = fetchKept().get(10, TimeUnit.SECONDS);
    assertTrue(lost != null && lost.getMessage().contains("did not reattach within"),
        String.valueOf(lost));
  }

  @Test
  void aCallThatRanOnTheEmbeddedWorkerRunsAgainAtOnceEvenBeforeItAttaches() throws Exception {
    restore("local", Duration.ofMinutes(1));
    assertEquals(0, onLoop(() -> plane.restoredRemoteWork().waitingCount()));
    Link other = new Link();
    onLoop(() -> plane.attach(worker("w-other", other)));
    eventually(() -> other.runs.contains("t1"));
  }

  @Test
  void spilledResidentValuesAreNamedAgainAfterTheRestartForTheSessionsThatLive()
      throws Exception {
    ObjectKey remoteSpill = ObjectKey.of(USER, "d".repeat(32));
    ObjectKey embeddedSpill = ObjectKey.of(USER, "e".repeat(32));
    store.put(embeddedSpill, ByteBuffer.wrap(new byte[] {5}));
    String h1 = "1".repeat(32);
    String h2 = "2".repeat(32);
    String h3 = "3".repeat(32);
    restore("w-remote", Duration.ofMinutes(1), List.of(
        new JournalRecord.ResidentSpill(remoteSpill.toString(), "w-remote", 64, "pickle",
            new String[] {h1, h2}, new String[] {"session-1", "session-ended"}),
        new JournalRecord.ResidentSpill(embeddedSpill.toString(), "local", 1, "",
            new String[] {h3}, new String[] {"session-1"})));
    var residents = onLoop(() -> plane.objects().residents());
    assertEquals("w-remote", onLoop(() -> residents.spillOf(USER, h1).orElseThrow().workerId()));
    assertTrue(onLoop(() -> residents.spillOf(USER, h2).isEmpty()), "its session ended");
    // The embedded agent's spills died with it; its object, in the runtime's store, serves a
    // call on any worker, the embedded one too.
    assertEquals(Map.of(h3, embeddedSpill), onLoop(() -> residents.forCall(USER, List.of(h3),
        "local", "").restore()));
    // The remote one is awaited from its worker, which reattaches holding it.
    Link remote = new Link();
    onLoop(() -> {
      AttachedWorker back = worker("w-remote", remote);
      plane.restoredRemoteWork().registered(back, true, Map.of("t1", List.of(1)), Set.of("t1"),
          Set.of(remoteSpill));
      plane.attach(back);
      return null;
    });
    assertTrue(onLoop(() -> plane.objects().keptOn("w-remote", remoteSpill)));
    assertEquals(Map.of(h1, remoteSpill), onLoop(() -> residents.forCall(USER, List.of(h1),
        "w-other", "").restore()));
  }
}
