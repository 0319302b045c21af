package dev.bulletin.runtime.harness;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.protocol.FailureCode;
import dev.bulletin.protocol.TaskEvent;
import dev.bulletin.protocol.TaskState;
import dev.bulletin.runtime.BulletinRuntime;
import dev.bulletin.runtime.harness.PythonCalls.EncodedCall;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * "Could this call ever run here" follows the workers as they join: the control plane keeps
 * the cluster's shapes from one change to the next instead of walking every worker at each
 * submit, and a join must be a change. The runtime's own worker has no GPU; a one-GPU call
 * fits only a simulated worker. (A leave parks the worker for its grace first: its shapes go
 * by the same path, {@code ControlPlane.detach}.)
 */
class WorkersJoinIT {

  @TempDir Path home;

  @Test
  void aOneGpuCallIsRefusedUntilAGpuWorkerJoins() throws Exception {
    EncodedCall call = ScaleRun.addCall(home);
    try (BulletinRuntime runtime = ScaleRun.startRuntime(home);
         HarnessClient client = ScaleRun.connect(runtime.address());
         HarnessSession session = client.openSession()) {
      assertRefused(session, call, "before");
      try (SimulatedWorkers simulated = new SimulatedWorkers(runtime.address(),
          ScaleRun.WORKER_TOKEN, 1, 1, call.result().orElseThrow().inline())) {
        session.submit(call.spec("while-attached"));
        assertEquals(TaskState.FINISHED, session.awaitEnd("while-attached").getState());
      }
    }
  }

  private static void assertRefused(HarnessSession session, EncodedCall call, String id) {
    session.submit(call.spec(id));
    TaskEvent end = session.awaitEnd(id);
    assertEquals(FailureCode.INFEASIBLE, end.getFailure().getCode(), end.toString());
    assertTrue(end.getFailure().getMessage().contains("GPU"), end.getFailure().getMessage());
  }
}
