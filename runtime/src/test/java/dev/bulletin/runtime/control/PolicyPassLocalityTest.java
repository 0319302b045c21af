package dev.bulletin.runtime.control;

import dev.bulletin.runtime.workers.RecordingLink;
import dev.bulletin.runtime.objects.ObjectDirectory;
import dev.bulletin.runtime.workers.AttachedWorker;
import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.bridge.ObjectStores;
import dev.bulletin.runtime.identity.Identity;
import dev.bulletin.runtime.scheduler.Demand;
import dev.bulletin.runtime.scheduler.WorkerSlots;
import dev.bulletin.runtime.scheduler.plan.Plan;
import dev.bulletin.runtime.scheduler.policy.PolicyConfig;
import dev.bulletin.runtime.task.Task;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The runtime's snapshot wiring: what workers reported holding ({@link ObjectDirectory}) and the
 * sizes of a call's inputs reach the policy scheduler, and the worker holding them wins.
 */
class PolicyPassLocalityTest {

  private static final ObjectKey FUNCTION = ObjectKey.of("ada", "f".repeat(32));
  private static final ObjectKey ARGS = ObjectKey.of("ada", "a".repeat(32));
  private static final ObjectKey RESULT = ObjectKey.of("ada", "1".repeat(32));

  @TempDir Path folder;
  private ObjectStore store;
  private ObjectDirectory objects;
  private List<AttachedWorker> workers;

  @BeforeEach
  void setUp() {
    store = ObjectStores.inFolder(folder.resolve("store"));
    store.put(ARGS, ByteBuffer.wrap(new byte[64]));
    workers = List.of(worker("w1"), worker("w2"), worker("w3"));
    objects = new ObjectDirectory(store, id -> workers.stream().filter(w -> w.id().equals(id))
        .findFirst().map(AttachedWorker::link));
  }

  @AfterEach
  void tearDown() {
    store.close();
  }

  private static AttachedWorker worker(String id) {
    return new AttachedWorker(id, id + ".lab", "", List.of("GPU"), true, 0, "",
        new WorkerSlots(id, 1, true, 4, 0), new RecordingLink(), "");
  }

  private Task callReading(ObjectKey input) {
    Task task = new Task("t-" + input.id().hex().substring(0, 4), "total",
        new Identity("ada", "default", true), new Demand(1, 1, 0), FUNCTION, ARGS,
        List.of(input), 0, event -> { }, System.nanoTime());
    task.scheduling("", 0, 0, Duration.ofMinutes(5));
    return task;
  }

  private String placedWorker(Task task) {
    PolicyPass pass = new PolicyPass(PolicyConfig.defaults(), Clock.systemUTC(),
        Duration.ofSeconds(60), 42);
    Plan plan = pass.plan(workers, List.of(), List.of(task), objects, true);
    assertEquals(1, plan.placements().size(), plan.toString());
    return plan.placements().get(0).workerId();
  }

  @ParameterizedTest
  @ValueSource(strings = {"w1", "w2", "w3"})
  void theWorkerThatKeptALargeInputWinsThePlacement(String keeper) {
    objects.kept(keeper, RESULT, 8 << 20, "tensor");
    assertEquals(keeper, placedWorker(callReading(RESULT)));
    objects.release(RESULT);
  }

  @Test
  void anInputAWorkerFetchedBeforeCountsToo() {
    store.put(RESULT, ByteBuffer.wrap(new byte[2 << 20])); // in the runtime's store, and w3's
    objects.held("w3", RESULT, 2 << 20);
    assertEquals("w3", placedWorker(callReading(RESULT)));
  }

  @Test
  void smallInputsDoNotSteerPlacement() {
    // Below locality_min_bytes (1 MiB) the locality score is off: packing and order decide.
    objects.kept("w3", RESULT, 4096, "pickle");
    String chosen = placedWorker(callReading(RESULT));
    objects.release(RESULT);
    objects.kept("w2", RESULT, 4096, "pickle");
    assertEquals(chosen, placedWorker(callReading(RESULT)));
    objects.release(RESULT);
  }
}
