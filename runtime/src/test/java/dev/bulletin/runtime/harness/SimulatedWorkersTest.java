package dev.bulletin.runtime.harness;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The scale benchmark's simulation is itself tested (make bench-scale runs it at 1,000
 * workers): simulated workers attach with the worker token, take calls from the real runtime
 * and every call ends exactly once, what each side had ready together travelling as one
 * message.
 */
class SimulatedWorkersTest {

  @TempDir Path home;

  @Test
  void everyCallOfABurstEndsOnceOnTheSimulatedWorkers() throws Exception {
    ScaleRun.Result result = ScaleRun.run(home, 10, 2, 300);
    assertEquals(300, result.finished(), "FINISHED events");
    assertEquals(300, result.finishedIds().size(), "distinct calls finished");
    for (int i = 0; i < 300; i++) {
      assertTrue(result.finishedIds().contains("c" + i), "c" + i + " never finished");
    }
    assertTrue(result.runtimeCpuMicrosPerCall() > 0, "the runtime's threads were measured");
  }

  /**
   * Issue 30's batching on the Attach stream, both ways: the calls one pass places on a worker
   * reach it in one message (a HeadBatch), and the worker's starts and ends of one turn come
   * back in one (a WorkerBatch, as the simulation sends them), each end taken once.
   */
  @Test
  void aPassesCallsForAWorkerGoInOneMessageAndItsBatchedEndsEachFinishACall() throws Exception {
    ScaleRun.Result result = ScaleRun.run(home, 1, 8, 8, "batch");
    assertEquals(8, result.finished(), "FINISHED events");
    assertEquals(8, result.finishedIds().size(), "distinct calls finished");
    assertEquals(8, result.largestRunBatch(), "one pass's 8 calls for the worker, one message");
    // Each caller gets the bytes the worker sent with the end (passed on, not read back).
    assertEquals(java.util.Set.of(ScaleRun.addCall(home).result().orElseThrow().inline()
        .getInlineData()), result.resultBytes());
  }
}
