package dev.bulletin.runtime.harness;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.protocol.TaskState;
import dev.bulletin.runtime.BulletinRuntime;
import dev.bulletin.runtime.harness.PythonCalls.EncodedCall;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A lone call's progress (running) is held a moment for its end to join it, so a short call
 * costs its client one message; a long call's still reaches the client while it runs. On
 * {@link SimulatedWorkers}, whose calls run for a set time.
 */
class SessionProgressTest {

  @TempDir Path home;

  private interface Calls {
    void run(EncodedCall call, HarnessSession session) throws Exception;
  }

  /** One simulated worker of one GPU whose calls end {@code runMillis} after they start. */
  private void onSimulatedWorker(long runMillis, Calls calls) throws Exception {
    EncodedCall call = ScaleRun.addCall(home);
    try (BulletinRuntime runtime = ScaleRun.startRuntime(home);
         SimulatedWorkers simulated = new SimulatedWorkers(runtime.address(),
             ScaleRun.WORKER_TOKEN, 1, 1, call.result().orElseThrow().inline(), runMillis);
         HarnessClient client = ScaleRun.connect(runtime.address());
         HarnessSession session = client.openSession()) {
      calls.run(call, session);
    }
  }

  @Test
  void aShortCallsRunningEventComesWithItsEnd() throws Exception {
    onSimulatedWorker(1, (call, session) -> {
      int joined = 0;
      for (int i = 0; i < 10; i++) { // one after the other: each is a lone call
        String id = "short-" + i;
        session.submit(call.spec(id));
        session.awaitEnd(id);
        if (session.events().oneMessage(id, TaskState.RUNNING, TaskState.FINISHED)) {
          joined++;
        }
      }
      // Each ends 1 ms after it starts, well within the hold. Sent at once, the running event
      // joined its end in 1 or 2 of 10 (when the event loop was late); a slow machine may
      // delay a few ends past the hold.
      assertTrue(joined >= 5, "only " + joined + " of 10 calls' running events came with"
          + " their end");
    });
  }

  @Test
  void aLongCallsRunningEventComesWhileItRuns() throws Exception {
    onSimulatedWorker(3_000, (call, session) -> {
      session.submit(call.spec("long"));
      session.awaitState("long", TaskState.RUNNING);
      assertFalse(session.states("long").contains(TaskState.FINISHED),
          "the running event was held until the call ended");
      session.awaitEnd("long");
    });
  }
}
