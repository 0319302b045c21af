package dev.bulletin.runtime.harness;

import static dev.bulletin.protocol.TaskState.FINISHED;
import static dev.bulletin.protocol.TaskState.QUEUED;
import static dev.bulletin.protocol.TaskState.RUNNING;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.protocol.TaskEvent;
import dev.bulletin.runtime.harness.PythonCalls.Call;
import dev.bulletin.runtime.harness.PythonCalls.EncodedCall;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Preemption through the public API: with the one GPU held by scavenger work (a preemptible
 * QoS class), an interactive call takes the GPU; the scavenger call goes back to the queue
 * without using a retry, and runs again, in a new executor, once the GPU is free.
 */
class PreemptionIT {

  /** Preempt at once, and kill the victim right after its checkpoint signal. */
  static final String CONFIG = """
      scheduler:
        preemption_grace: 0s
        reclaim_patience: 0
      """;

  @TempDir static Path home;
  static RuntimeHarness runtime;
  static HarnessClient client;
  static Map<String, EncodedCall> calls;

  @BeforeAll
  static void start() throws Exception {
    calls = PythonCalls.encode(home.resolve("calls"), List.of(
        Call.of("scavenger", "write_pid_and_wait", home.resolve("scavenger.pid").toString(),
            home.resolve("release").toString(), 600),
        Call.of("urgent", "add", 1, 1).returning(2)));
    runtime = RuntimeHarness.start(home.resolve("runtime"), 1,
        RuntimeHarness.config(home, CONFIG));
    client = runtime.connect();
  }

  @AfterAll
  static void stop() {
    if (client != null) {
      client.close();
    }
    if (runtime != null) {
      runtime.close();
    }
  }

  @Test
  void aHigherPriorityCallPreemptsScavengerWorkWhichRunsAgainAfterIt() throws Exception {
    Path pidFile = home.resolve("scavenger.pid");
    try (HarnessSession session = client.openSession()) {
      session.submit(calls.get("scavenger").spec("victim").setQos("scavenger"));
      session.awaitState("victim", RUNNING);
      long firstExecutor = ExecutorPids.await(pidFile);
      Files.delete(pidFile);

      session.submit(calls.get("urgent").spec("urgent").setQos("interactive"));
      TaskEvent urgent = session.awaitEnd("urgent");
      assertEquals(FINISHED, urgent.getState());
      assertEquals(calls.get("urgent").result().orElseThrow().id(),
          urgent.getResult().getValue().getId());
      // (A wait reason counting the preemption comes only if a pass sees the victim wait.)
      long secondExecutor = ExecutorPids.await(pidFile);
      assertNotEquals(firstExecutor, secondExecutor, "the preempted executor was replaced");

      Files.createFile(home.resolve("release"));
      assertEquals(FINISHED, session.awaitEnd("victim").getState());
      assertEquals(List.of(RUNNING, QUEUED, RUNNING, FINISHED), session.states("victim"));
      EventLog log = session.events();
      assertTrue(log.position("victim", QUEUED) < log.position("urgent", RUNNING),
          "the victim gave the GPU back before the urgent call started: " + log.all());
      assertTrue(log.position("urgent", FINISHED) < log.positions("victim", RUNNING).get(1),
          "the victim ran again only after the urgent call ended: " + log.all());
    }
  }
}
