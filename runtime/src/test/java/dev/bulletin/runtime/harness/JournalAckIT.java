package dev.bulletin.runtime.harness;

import static dev.bulletin.protocol.TaskState.FINISHED;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.protocol.SubmitReply;
import dev.bulletin.protocol.TaskEvent;
import dev.bulletin.runtime.RuntimeOptions;
import dev.bulletin.runtime.config.RuntimeConfig;
import dev.bulletin.runtime.harness.PythonCalls.Call;
import dev.bulletin.runtime.harness.PythonCalls.EncodedCall;
import dev.bulletin.runtime.journal.impl.HeldSyncs;
import dev.bulletin.worker.GpuInventory;
import dev.bulletin.worker.WorkerOptions;
import io.vertx.core.Future;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The journal's two marks through the public API (docs/durability.md, "Written and durable"):
 * a call on the embedded worker runs while the disk has not synced its acceptance, and the
 * Submit's reply, the client's acknowledgement, still waits for that sync.
 */
class JournalAckIT {

  @TempDir Path home;

  @Test
  void aCallRunsBeforeItsAcceptanceIsSyncedAndTheSubmitReplyWaitsForTheSync() throws Exception {
    Map<String, EncodedCall> calls = PythonCalls.encode(home.resolve("calls"),
        List.of(Call.of("add", "add", 2, 3).returning(5)));
    HeldSyncs syncs = new HeldSyncs();
    Path runtimeHome = home.resolve("runtime");
    WorkerOptions worker = new WorkerOptions("harness", PythonCalls.python(),
        GpuInventory.simulated(1), 2, 4L << 30, 0, 60_000, 0,
        WorkerOptions.DEFAULT_EXECUTOR_IDLE_MILLIS, Map.of());
    RuntimeOptions options = RuntimeOptions.builder(runtimeHome, worker)
        .owner(RuntimeHarness.OWNER_TOKEN, RuntimeHarness.OWNER).config(RuntimeConfig.empty())
        .storeFolder(runtimeHome.resolve("store")).spillFolder(runtimeHome.resolve("spill"))
        .build();
    try (RuntimeHarness runtime = RuntimeHarness.start(options, syncs);
         HarnessClient client = runtime.connect();
         HarnessSession session = client.openSession()) {
      syncs.hold();
      int synced = syncs.completed();
      Future<SubmitReply> reply = session.submitAsync(calls.get("add").spec("add-1"));

      TaskEvent end = session.awaitEnd("add-1");
      assertEquals(FINISHED, end.getState());
      assertEquals(1, end.getAttempt());
      assertEquals(synced, syncs.completed(), "the call ran while no fsync could complete");
      Thread.sleep(200); // the reply had every chance to leave, had it not waited
      assertFalse(reply.isComplete(), "the Submit was acknowledged before it was synced");

      syncs.release();
      HarnessClient.await(reply);
      assertTrue(syncs.completed() > synced);
    } finally {
      syncs.release();
    }
  }
}
