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
    assertTrue(result.workerMessagesPerCall() * 8 >= 2,
        "the bench counts the batch the worker got and the reports it sent: "
            + result.workerMessagesPerCall() * 8);
    assertTrue(result.runtimeBytesPerCall() > 0, "the runtime's threads' allocation was read");
    // Each caller gets the bytes the worker sent with the end (passed on, not read back).
    assertEquals(java.util.Set.of(ScaleRun.addCall(home).result().orElseThrow().inline()
        .getInlineData()), result.resultBytes());
  }

  /**
   * A session's end tells the workers its calls went to to drop the values it kept there
   * (DropResident), and no other: 2,000 sessions ending on 1,000 workers were two million
   * messages when every worker was told.
   */
  @Test
  void aSessionsEndIsToldOnlyToTheWorkersItsCallsWentTo() throws Exception {
    PythonCalls.EncodedCall call = ScaleRun.addCall(home);
    try (dev.bulletin.runtime.BulletinRuntime runtime = ScaleRun.startRuntime(home,
             RuntimeHarness.config(home, BenchUsers.config(1)));
         SimulatedWorkers simulated = new SimulatedWorkers(runtime.address(),
             ScaleRun.WORKER_TOKEN, 4, 1, call.result().orElseThrow().inline())) {
      BenchUsers user = new BenchUsers(runtime.address(), 1);
      try {
        user.submit(1, i -> call.spec("c" + i));
        long deadline = System.nanoTime() + RuntimeHarness.PATIENCE.toNanos();
        while (user.finished().isEmpty() && System.nanoTime() < deadline) {
          Thread.sleep(20);
        }
        assertEquals(1, user.finished().size(), "the call finished");
      } finally {
        user.close(); // its session ends
      }
      java.util.Map<String, Integer> ran = simulated.answered();
      assertEquals(1, ran.size(), "one worker ran the call: " + ran);
      long deadline = System.nanoTime() + RuntimeHarness.PATIENCE.toNanos();
      while (simulated.dropsHeard().isEmpty() && System.nanoTime() < deadline) {
        Thread.sleep(20);
      }
      Thread.sleep(200); // a DropResident sent to another worker would have arrived by now too
      assertEquals(java.util.Map.of(ran.keySet().iterator().next(), 1), simulated.dropsHeard());
    }
  }
}
