package dev.bulletin.runtime.harness;

import static dev.bulletin.protocol.TaskState.CANCELLED;
import static dev.bulletin.protocol.TaskState.ERROR;
import static dev.bulletin.protocol.TaskState.FINISHED;
import static dev.bulletin.protocol.TaskState.QUEUED;
import static dev.bulletin.protocol.TaskState.RUNNING;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.protocol.FailureCode;
import dev.bulletin.protocol.PutObjectReply;
import dev.bulletin.protocol.TaskEvent;
import dev.bulletin.runtime.harness.PythonCalls.Call;
import dev.bulletin.runtime.harness.PythonCalls.EncodedCall;
import dev.bulletin.runtime.config.RuntimeConfig;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The control plane through its public gRPC API: a call's life from submit to its end, cancel
 * while queued and while running, a timeout, and the end of a session. One runtime with one
 * simulated GPU serves the class; each test leaves that GPU free.
 */
class ControlPlaneIT {

  @TempDir static Path home;
  static RuntimeHarness runtime;
  static HarnessClient client;
  static Map<String, EncodedCall> calls;
  HarnessSession session;

  @BeforeAll
  static void start() throws Exception {
    Path files = home.resolve("calls");
    calls = PythonCalls.encode(files, List.of(
        Call.of("add", "add", 2, 3).returning(5),
        Call.of("fail", "fail", "on purpose"),
        Call.of("sleep", "sleep", 600),
        Call.of("hold-gpu", "write_pid_and_wait", pid("hold-gpu"), gate("hold-gpu"), 600),
        Call.of("to-cancel", "write_pid_and_wait", pid("to-cancel"), gate("never"), 600),
        Call.of("after-cancel", "write_pid", pid("after-cancel")),
        Call.of("in-session", "write_pid_and_wait", pid("in-session"), gate("never"), 600)));
    runtime = RuntimeHarness.start(home.resolve("runtime"), 1, RuntimeConfig.empty());
    client = runtime.connect();
  }

  static String pid(String call) {
    return home.resolve(call + ".pid").toString();
  }

  static String gate(String name) {
    return home.resolve(name + ".gate").toString();
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

  @BeforeEach
  void open() {
    session = client.openSession();
  }

  @AfterEach
  void close() {
    session.close();
  }

  static String taskId(String name) {
    return name + "-" + UUID.randomUUID();
  }

  @Test
  void aCallRunsAndFinishesWithItsResultObject() {
    EncodedCall add = calls.get("add");
    // The function goes up first, as a large one would; the call names it by id.
    PutObjectReply uploaded = session.upload(add.function());
    assertEquals(add.function().id(), uploaded.getId(), "the runtime stores it under its content id");
    String id = taskId("add");
    session.submit(add.spec(id).setFunction(add.function().ref()));

    TaskEvent end = session.awaitEnd(id);
    assertEquals(List.of(RUNNING, FINISHED), session.states(id));
    TaskEvent running = session.awaitState(id, RUNNING);
    assertEquals("harness", running.getPlacement().getWorkerId());
    assertEquals(List.of(0), running.getPlacement().getGpuIdsList());
    assertTrue(running.getPlacement().getSimulatedGpus());
    assertFalse(end.getResult().getRaised());
    PythonCalls.EncodedObject expected = add.result().orElseThrow();
    assertEquals(expected.id(), end.getResult().getValue().getId(), "the result is encode(5)");
    assertArrayEquals(expected.bytes(), end.getResult().getValue().getInlineData().toByteArray(),
        "a small result comes inline, byte for byte what the executor encoded");
  }

  @Test
  void aCallThatRaisesEndsInErrorCarryingTheRaisedObject() {
    String id = taskId("fail");
    session.submit(calls.get("fail").spec(id));

    TaskEvent end = session.awaitEnd(id);
    assertEquals(List.of(RUNNING, ERROR), session.states(id));
    assertTrue(end.getResult().getRaised(), "the function's exception comes back as its result");
    assertFalse(end.getResult().getValue().getInlineData().isEmpty());
  }

  @Test
  void cancellingAQueuedCallEndsItWithoutRunningIt() throws Exception {
    String holder = taskId("hold-gpu");
    session.submit(calls.get("hold-gpu").spec(holder));
    session.awaitState(holder, RUNNING);
    String queued = taskId("add");
    session.submit(calls.get("add").spec(queued));
    session.awaitState(queued, QUEUED);

    session.cancel(queued);
    TaskEvent end = session.awaitEnd(queued);
    assertEquals(List.of(QUEUED, CANCELLED), session.states(queued));
    assertEquals(FailureCode.CANCELLED_BY_USER, end.getFailure().getCode());

    Files.createFile(Path.of(gate("hold-gpu")));
    assertEquals(FINISHED, session.awaitEnd(holder).getState());
    assertEquals(List.of(RUNNING, FINISHED), session.states(holder), "the other call ran on");
  }

  @Test
  void cancellingARunningCallKillsItsExecutorAndTheNextCallGetsAFreshOne() throws Exception {
    String id = taskId("to-cancel");
    session.submit(calls.get("to-cancel").spec(id));
    session.awaitState(id, RUNNING);
    long killed = ExecutorPids.await(Path.of(pid("to-cancel")));

    session.cancel(id);
    TaskEvent end = session.awaitEnd(id);
    assertEquals(List.of(RUNNING, CANCELLED), session.states(id));
    assertEquals(FailureCode.CANCELLED_BY_USER, end.getFailure().getCode());
    assertTrue(end.getFailure().getMessage().contains("executor was replaced"),
        end.getFailure().getMessage());
    ExecutorPids.awaitExit(killed);

    String next = taskId("after-cancel");
    session.submit(calls.get("after-cancel").spec(next));
    assertEquals(FINISHED, session.awaitEnd(next).getState());
    assertNotEquals(killed, ExecutorPids.await(Path.of(pid("after-cancel"))),
        "the GPU's next call runs in a new executor");
  }

  @Test
  void aCallPastItsTimeoutEndsTimedOut() {
    String id = taskId("sleep");
    session.submit(calls.get("sleep").spec(id).setTimeoutSeconds(1));

    TaskEvent end = session.awaitEnd(id);
    assertEquals(List.of(RUNNING, ERROR), session.states(id));
    assertEquals(FailureCode.TIMED_OUT, end.getFailure().getCode(), end.toString());
    assertTrue(end.getFailure().getMessage().contains("timeout of 1.0 s"),
        end.getFailure().getMessage());
  }

  @Test
  void endingASessionStopsItsRunningAndQueuedCalls() throws Exception {
    long executor;
    try (HarnessSession leaving = client.openSession()) {
      String running = taskId("in-session");
      String queued = taskId("add");
      leaving.submit(calls.get("in-session").spec(running));
      leaving.awaitState(running, RUNNING);
      leaving.submit(calls.get("add").spec(queued));
      leaving.awaitState(queued, QUEUED);
      executor = ExecutorPids.await(Path.of(pid("in-session")));
    } // the stream half-closes: the session ends
    client.awaitStatus(status -> status.getQueueCount() == 0 && status.getRunning() == 0
        && status.getGpus().getReserved() == 0, "no call left of the ended session");
    ExecutorPids.awaitExit(executor);

    String next = taskId("add");
    session.submit(calls.get("add").spec(next));
    assertEquals(FINISHED, session.awaitEnd(next).getState(), "the GPU serves the next session");
  }
}
