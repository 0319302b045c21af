package dev.bulletin.worker.impl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.bridge.ObjectStores;
import dev.bulletin.worker.CallListener;
import dev.bulletin.worker.CallOutcome;
import dev.bulletin.worker.CallRequest;
import dev.bulletin.worker.GpuInventory;
import dev.bulletin.worker.WorkerAgent;
import dev.bulletin.worker.WorkerOptions;
import dev.bulletin.worker.Workers;
import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The worker agent with real Python executors over Py4J. Needs an interpreter with the bulletin
 * package: BULLETIN_TEST_PYTHON (the Makefile sets it to the project's venv).
 */
class LocalWorkerAgentIT {

  @TempDir Path folder;
  private Path python;
  private ObjectStore store;
  private WorkerAgent agent;

  @BeforeEach
  void start() throws Exception {
    String configured = System.getenv("BULLETIN_TEST_PYTHON");
    assertNotNull(configured, "set BULLETIN_TEST_PYTHON to a Python with the bulletin package"
        + " (make test does)");
    python = Path.of(configured);
    store = ObjectStores.inFolder(folder.resolve("store"));
    agent = Workers.local(new WorkerOptions("test", python, GpuInventory.simulated(1), 2,
        1L << 30, 1, 60_000, Map.of()), store);
    agent.start().get(90, TimeUnit.SECONDS);
  }

  @AfterEach
  void stop() {
    agent.close();
    store.close();
  }

  /** Encodes a Python expression's value as the client does, with the test interpreter. */
  private ObjectKey pickle(String expression) throws Exception {
    Path out = folder.resolve("pickle-" + System.nanoTime());
    Process process = new ProcessBuilder(python.toString(), "-c",
        "import os, sys, signal, time\n"
            + "from bulletin._data._objects import encode\n"
            + "e = encode(" + expression + ")\n"
            + "open(sys.argv[1], 'wb').write(e.to_bytes())\n"
            + "open(sys.argv[1] + '.id', 'w').write(e.digest())",
        out.toString()).inheritIO().start();
    assertTrue(process.waitFor(60, TimeUnit.SECONDS) && process.exitValue() == 0);
    ObjectKey key = ObjectKey.of("ada", Files.readString(Path.of(out + ".id")).strip());
    return store.put(key, ByteBuffer.wrap(Files.readAllBytes(out)));
  }

  private static final class Recorder implements CallListener {
    final ByteArrayOutputStream stdout = new ByteArrayOutputStream();
    volatile String executor;

    @Override
    public void started(String executorId) {
      executor = executorId;
    }

    @Override
    public synchronized void output(boolean stderr, byte[] data) {
      if (!stderr) {
        stdout.writeBytes(data);
      }
    }
  }

  private CallOutcome run(String taskId, ObjectKey function, ObjectKey args, List<Integer> gpus,
      Recorder recorder) throws Exception {
    return agent.run(new CallRequest(taskId, function, args, gpus), recorder)
        .get(60, TimeUnit.SECONDS);
  }

  @Test
  void runsACallInAWarmExecutorPinnedToItsGpuAndForwardsItsOutput() throws Exception {
    ObjectKey function = pickle("lambda n: print('gpu', os.environ['CUDA_VISIBLE_DEVICES']) or n * 2");
    ObjectKey args = pickle("((21,), {})");
    Recorder first = new Recorder();
    CallOutcome outcome = run("t1", function, args, List.of(0), first);
    CallOutcome.Returned returned = assertInstanceOf(CallOutcome.Returned.class, outcome);
    assertFalse(returned.raised());
    assertEquals("gpu 0\n", first.stdout.toString(StandardCharsets.UTF_8));
    long launches = agent.status().executorLaunches();

    Recorder second = new Recorder();
    run("t2", function, args, List.of(0), second);
    assertEquals(first.executor, second.executor, "the second call reuses the warm executor");
    assertEquals(launches, agent.status().executorLaunches(), "no new Python process started");
  }

  @Test
  void anExecutorThatDiesIsReportedWithItsCauseAndReplaced() throws Exception {
    ObjectKey function = pickle("lambda: os.kill(os.getpid(), signal.SIGKILL)");
    ObjectKey args = pickle("((), {})");
    CallOutcome outcome = run("t1", function, args, List.of(), new Recorder());
    CallOutcome.ExecutorDied died = assertInstanceOf(CallOutcome.ExecutorDied.class, outcome);
    assertTrue(died.cause().contains("SIGKILL"), died.cause());

    ObjectKey ok = pickle("lambda: 1");
    assertInstanceOf(CallOutcome.Returned.class, run("t2", ok, args, List.of(), new Recorder()));
  }

  @Test
  void stoppingARunningCallKillsItsExecutor() throws Exception {
    ObjectKey function = pickle("lambda: time.sleep(60)");
    ObjectKey args = pickle("((), {})");
    Recorder recorder = new Recorder();
    var pending = agent.run(new CallRequest("t1", function, args, List.of()), recorder);
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (recorder.executor == null && System.nanoTime() < deadline) {
      Thread.sleep(20);
    }
    Thread.sleep(200); // let the call reach Python
    agent.stop("t1", "cancelled in a test");
    CallOutcome outcome = pending.get(30, TimeUnit.SECONDS);
    assertEquals(new CallOutcome.Stopped("cancelled in a test"), outcome);
  }
}
