package dev.bulletin.runtime.control;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.bridge.ObjectStores;
import dev.bulletin.runtime.identity.Identity;
import dev.bulletin.runtime.objects.ObjectDirectory;
import dev.bulletin.runtime.scheduler.Demand;
import dev.bulletin.runtime.scheduler.WorkerSlots;
import dev.bulletin.runtime.scheduler.plan.Placement;
import dev.bulletin.runtime.scheduler.plan.Plan;
import dev.bulletin.runtime.scheduler.policy.PolicyConfig;
import dev.bulletin.runtime.task.Task;
import dev.bulletin.runtime.workers.AttachedWorker;
import dev.bulletin.runtime.workers.RecordingLink;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * One {@link PolicyPass} over several passes keeps each worker's view between them: whatever
 * changed on a worker in between (its free GPUs, its resident GPUs, its held objects, the set of
 * workers) is what the next pass sees. A change the kept view missed would place a call on GPUs
 * that are taken, or ignore ones that were freed.
 */
class PolicyPassKeptStateTest {

  private static final ObjectKey FUNCTION = ObjectKey.of("ada", "f".repeat(32));
  private static final ObjectKey ARGS = ObjectKey.of("ada", "a".repeat(32));
  private static final ObjectKey INPUT = ObjectKey.of("ada", "1".repeat(32));
  private static final Demand ONE_GPU = new Demand(1, 1, 0);

  @TempDir Path folder;
  private ObjectStore store;
  private ObjectDirectory objects;
  private final List<AttachedWorker> workers = new ArrayList<>();
  private final PolicyPass pass = new PolicyPass(PolicyConfig.defaults(), Clock.systemUTC(),
      Duration.ofSeconds(60), 42);
  private int calls;

  @BeforeEach
  void setUp() {
    store = ObjectStores.inFolder(folder.resolve("store"));
    store.put(ARGS, ByteBuffer.wrap(new byte[64]));
    store.put(INPUT, ByteBuffer.wrap(new byte[2 << 20]));
    objects = new ObjectDirectory(store, id -> workers.stream().filter(w -> w.id().equals(id))
        .findFirst().map(AttachedWorker::link));
  }

  @AfterEach
  void tearDown() {
    store.close();
  }

  private static AttachedWorker worker(String id, int gpus) {
    return new AttachedWorker(id, id + ".lab", "", List.of("GPU"), true, 0, "",
        new WorkerSlots(id, gpus, true, 4, 0), new RecordingLink(), "");
  }

  private Task call(Demand demand, List<ObjectKey> inputs) {
    Task task = new Task("t" + calls++, "total", new Identity("ada", "default", true), demand,
        FUNCTION, ARGS, inputs, 0, event -> { }, System.nanoTime());
    task.scheduling("", 0, 0, Duration.ofMinutes(5));
    return task;
  }

  /** The placement of one new call, or null when it waits. */
  private Placement place(Demand demand, List<ObjectKey> inputs) {
    Plan plan = pass.plan(workers, List.of(), List.of(call(demand, inputs)), objects, true);
    return plan.placements().isEmpty() ? null : plan.placements().get(0);
  }

  @Test
  void freeGpusTakenAndGivenBackBetweenPassesAreSeen() {
    AttachedWorker w1 = worker("w1", 2);
    workers.add(w1);
    assertEquals(List.of(0), place(ONE_GPU, List.of()).gpuIds());

    w1.reserve("a", ONE_GPU, List.of(0));
    assertEquals(List.of(1), place(ONE_GPU, List.of()).gpuIds(), "GPU 0 is taken now");

    w1.reserve("b", ONE_GPU, List.of(1));
    assertEquals(null, place(ONE_GPU, List.of()), "no GPU is free now");

    w1.release("a");
    assertEquals(List.of(0), place(ONE_GPU, List.of()).gpuIds(), "GPU 0 was given back");
  }

  @Test
  void aShareOfAGpuTakenBetweenPassesIsSeen() {
    AttachedWorker w1 = worker("w1", 1);
    workers.add(w1);
    Demand half = new Demand(0, 1, 0, 4);
    w1.reserve("a", half, List.of(0));
    assertEquals(null, place(ONE_GPU, List.of()), "a whole-GPU call does not share");
    w1.release("a");
    assertEquals("w1", place(ONE_GPU, List.of()).workerId());
  }

  @Test
  void gpusKeepingAnotherSessionsStateBetweenPassesAreAvoided() {
    AttachedWorker w1 = worker("w1", 2);
    workers.add(w1);
    assertEquals(List.of(0), place(ONE_GPU, List.of()).gpuIds());

    w1.residentGpus().callEnded(List.of(0), "bob", "s1", 1024);
    assertEquals(List.of(1), place(ONE_GPU, List.of()).gpuIds(), "GPU 0 keeps bob's values");

    w1.residentGpus().sessionEnded("bob", "s1");
    assertEquals(List.of(0), place(ONE_GPU, List.of()).gpuIds(), "bob's session ended");
  }

  @Test
  void objectsAWorkerReportsBetweenPassesSteerTheNextPass() {
    workers.addAll(List.of(worker("w1", 1), worker("w2", 1), worker("w3", 1)));
    String first = place(ONE_GPU, List.of(INPUT)).workerId();
    String holder = first.equals("w3") ? "w2" : "w3";

    objects.held(holder, INPUT, 2 << 20);
    assertEquals(holder, place(ONE_GPU, List.of(INPUT)).workerId());
  }

  @Test
  void aWorkerThatLeftAndAttachedAgainUnderItsIdIsSeenAsNew() {
    AttachedWorker before = worker("w1", 2);
    workers.add(before);
    before.reserve("a", ONE_GPU, List.of(0));
    assertEquals(List.of(1), place(ONE_GPU, List.of()).gpuIds());

    workers.clear();
    AttachedWorker again = worker("w1", 2);
    again.reserve("b", ONE_GPU, List.of(1));
    workers.add(again);
    assertEquals(List.of(0), place(ONE_GPU, List.of()).gpuIds(), "the new w1 has GPU 0 free");
  }

  /** A clock the test moves. */
  private static final class MovingClock extends Clock {
    Instant now = Instant.parse("2026-11-29T09:00:00Z");

    @Override
    public java.time.ZoneId getZone() {
      return java.time.ZoneOffset.UTC;
    }

    @Override
    public Clock withZone(java.time.ZoneId zone) {
      return this;
    }

    @Override
    public Instant instant() {
      return now;
    }
  }

  /**
   * The running calls' views are kept between passes (Task#runningView): the work a victim
   * would lose still grows with time, and a call being preempted since the last pass is seen as
   * such (not chosen again; its beneficiary waits for it).
   */
  @Test
  void aKeptRunningCallLosesMoreWorkAsTimePassesAndIsSeenOnceBeingPreempted() {
    MovingClock clock = new MovingClock();
    PolicyPass timed = new PolicyPass(PolicyConfig.defaults(), clock, Duration.ofSeconds(60), 42);
    AttachedWorker w1 = worker("w1", 1);
    workers.add(w1);
    Task victim = call(ONE_GPU, List.of());
    victim.scheduling("scavenger", 0, 0, Duration.ofHours(1));
    victim.placedOn("w1", List.of(0), System.nanoTime());
    victim.placedPreemptible(true);
    w1.reserve(victim.id(), ONE_GPU, List.of(0));
    Task waiting = call(ONE_GPU, List.of());
    waiting.restored(clock.now.minus(Duration.ofHours(1)), 0);

    Plan first = timed.plan(workers, List.of(victim), List.of(waiting), objects, true);
    assertEquals(List.of(victim.id()), first.preemptions().stream()
        .map(p -> p.victimId()).toList());
    assertEquals(0.0, first.preemptions().get(0).lostGpuSeconds(), "placed this pass");

    clock.now = clock.now.plusSeconds(90);
    Plan later = timed.plan(workers, List.of(victim), List.of(waiting), objects, true);
    assertEquals(90.0, later.preemptions().get(0).lostGpuSeconds(), "90 s of its work");

    victim.preempting(waiting.id());
    Plan stopping = timed.plan(workers, List.of(victim), List.of(waiting), objects, true);
    assertEquals(List.of(), stopping.preemptions(), "already being stopped for it");
    assertEquals(dev.bulletin.runtime.scheduler.plan.WaitCode.PREEMPTING,
        stopping.waiting().get(0).info().code());
  }

  /**
   * A queued call's view is kept while nothing in it can change, and built again when its
   * scheduling terms do (credits offered, here); one that reads resident values is never kept.
   */
  @Test
  void aKeptQueuedCallIsBuiltAgainWhenItsTermsChange() {
    workers.add(worker("w1", 1));
    workers.get(0).reserve("a", ONE_GPU, List.of(0));
    Task waiting = call(ONE_GPU, List.of());
    pass.plan(workers, List.of(), List.of(waiting), objects, true);
    var kept = waiting.queuedView();
    assertTrue(kept != null && kept.creditsSpent() == 0);
    pass.plan(workers, List.of(), List.of(waiting), objects, true);
    assertTrue(kept == waiting.queuedView(), "nothing changed: the same view");

    waiting.scheduling("", 0, 7, Duration.ofMinutes(5));
    pass.plan(workers, List.of(), List.of(waiting), objects, true);
    assertEquals(7, waiting.queuedView().creditsSpent());

    Task resident = call(ONE_GPU, List.of());
    resident.readsResident(List.of("h1"), "w1");
    pass.plan(workers, List.of(), List.of(resident), objects, true);
    assertEquals(null, resident.queuedView(), "where its values live may change");
  }

  @Test
  void workersAttachingAndLeavingBetweenPassesAreSeen() {
    AttachedWorker w1 = worker("w1", 1);
    workers.add(w1);
    w1.reserve("a", ONE_GPU, List.of(0));
    assertEquals(null, place(ONE_GPU, List.of()));

    workers.add(worker("w2", 1));
    assertEquals("w2", place(ONE_GPU, List.of()).workerId());

    workers.remove(1);
    assertEquals(null, place(ONE_GPU, List.of()));
    w1.release("a");
    assertTrue(place(ONE_GPU, List.of()) != null);
  }
}
