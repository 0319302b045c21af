package dev.bulletin.worker.impl;

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

/**
 * A worker agent with real Python executors over Py4J, for the agent's tests. Needs an
 * interpreter with the bulletin package: BULLETIN_TEST_PYTHON (the Makefile sets it to the
 * project's venv).
 */
final class AgentHarness implements AutoCloseable {

  final Path folder;
  final Path python;
  /** On the executors' PYTHONPATH (WorkerOptions.extraEnvironment): modules tests write. */
  final Path modules;
  final ObjectStore store;
  final WorkerAgent agent;

  /** One simulated GPU, two CPU slots, one warm CPU executor. */
  static AgentHarness start(Path folder) throws Exception {
    return start(folder, 0, WorkerOptions.DEFAULT_EXECUTOR_IDLE_MILLIS);
  }

  static AgentHarness start(Path folder, int maxCalls, long idleMillis) throws Exception {
    String configured = System.getenv("BULLETIN_TEST_PYTHON");
    assertNotNull(configured, "set BULLETIN_TEST_PYTHON to a Python with the bulletin package"
        + " (make test does)");
    return new AgentHarness(folder, Path.of(configured), maxCalls, idleMillis);
  }

  private AgentHarness(Path folder, Path python, int maxCalls, long idleMillis) throws Exception {
    this.folder = folder;
    this.python = python;
    this.store = ObjectStores.inFolder(folder.resolve("store"));
    this.modules = Files.createDirectories(folder.resolve("modules"));
    this.agent = Workers.local(new WorkerOptions("test", python, GpuInventory.simulated(1), 2,
        1L << 30, 1, 60_000, maxCalls, idleMillis, Map.of("PYTHONPATH", modules.toString())),
        store);
    agent.start().get(90, TimeUnit.SECONDS);
  }

  /** Encodes a Python expression's value as the client does, into user {@code ada}'s objects. */
  ObjectKey pickle(String expression) throws Exception {
    return pickle("ada", expression);
  }

  /** Encodes a Python expression's value as the client does, into a user's objects. */
  ObjectKey pickle(String user, String expression) throws Exception {
    Path out = folder.resolve("pickle-" + System.nanoTime());
    Process process = new ProcessBuilder(python.toString(), "-c",
        "import os, sys, signal, time, json, gc, resource\n"
            + "from bulletin._data._objects import encode\n"
            + "e = encode(" + expression + ")\n"
            + "open(sys.argv[1], 'wb').write(e.to_bytes())\n"
            + "open(sys.argv[1] + '.id', 'w').write(e.digest())",
        out.toString()).inheritIO().start();
    assertTrue(process.waitFor(60, TimeUnit.SECONDS) && process.exitValue() == 0);
    ObjectKey key = ObjectKey.of(user, Files.readString(Path.of(out + ".id")).strip());
    return store.put(key, ByteBuffer.wrap(Files.readAllBytes(out)));
  }

  CallOutcome run(String taskId, ObjectKey function, ObjectKey args, List<Integer> gpus,
      Recorder recorder) throws Exception {
    return agent.run(new CallRequest(taskId, function, args, gpus), recorder)
        .get(60, TimeUnit.SECONDS);
  }

  /** Runs a call and returns what it printed; fails unless it returned without raising. */
  Recorder runPrinting(String taskId, ObjectKey function, ObjectKey args, List<Integer> gpus)
      throws Exception {
    Recorder recorder = new Recorder();
    CallOutcome outcome = run(taskId, function, args, gpus, recorder);
    if (!(outcome instanceof CallOutcome.Returned returned) || returned.raised()) {
      throw new AssertionError("call " + taskId + " did not return: " + outcome + "; stderr:\n"
          + recorder.stderr());
    }
    return recorder;
  }

  @Override
  public void close() {
    agent.close();
    store.close();
  }

  /** Records a call's executor and output. */
  static final class Recorder implements CallListener {
    private final ByteArrayOutputStream stdout = new ByteArrayOutputStream();
    private final ByteArrayOutputStream stderr = new ByteArrayOutputStream();
    volatile String executor;

    @Override
    public void started(String executorId) {
      executor = executorId;
    }

    @Override
    public synchronized void output(boolean stderr, byte[] data) {
      (stderr ? this.stderr : stdout).writeBytes(data);
    }

    synchronized String stdout() {
      return stdout.toString(StandardCharsets.UTF_8);
    }

    synchronized String stderr() {
      return stderr.toString(StandardCharsets.UTF_8);
    }
  }
}
