package dev.bulletin.worker.impl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.worker.CallOutcome;
import dev.bulletin.worker.CallRequest;
import dev.bulletin.worker.WorkerAgent;
import dev.bulletin.worker.impl.AgentHarness.Recorder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The worker agent with real Python executors over Py4J ({@link AgentHarness}). */
class LocalWorkerAgentIT {

  @TempDir Path folder;
  private AgentHarness harness;
  private WorkerAgent agent;

  @BeforeEach
  void start() throws Exception {
    harness = AgentHarness.start(folder);
    agent = harness.agent;
  }

  @AfterEach
  void stop() {
    harness.close();
  }

  private ObjectKey pickle(String expression) throws Exception {
    return harness.pickle(expression);
  }

  private CallOutcome run(String taskId, ObjectKey function, ObjectKey args, List<Integer> gpus,
      Recorder recorder) throws Exception {
    return harness.run(taskId, function, args, gpus, recorder);
  }

  @Test
  void runsACallInAWarmExecutorPinnedToItsGpuAndForwardsItsOutput() throws Exception {
    ObjectKey function = pickle("lambda n: print('gpu', os.environ['CUDA_VISIBLE_DEVICES']) or n * 2");
    ObjectKey args = pickle("((21,), {})");
    Recorder first = new Recorder();
    CallOutcome outcome = run("t1", function, args, List.of(0), first);
    CallOutcome.Returned returned = assertInstanceOf(CallOutcome.Returned.class, outcome);
    assertFalse(returned.raised());
    assertEquals("gpu 0\n", first.stdout());
    long launches = agent.status().executorLaunches();

    Recorder second = new Recorder();
    run("t2", function, args, List.of(0), second);
    assertEquals(first.executor, second.executor, "the second call reuses the warm executor");
    assertEquals(launches, agent.status().executorLaunches(), "no new Python process started");
  }

  @Test
  void anExecutorsEnvironmentHoldsOnlyAllowlistedVariablesAndNoSecret() throws Exception {
    // The surefire configuration puts an owner token, a worker token and an unlisted variable
    // into this JVM's environment (worker/pom.xml), as a runtime has them.
    ObjectKey function = pickle("lambda: print(json.dumps(dict(os.environ)))");
    Recorder recorder = new Recorder();
    CallOutcome outcome = run("t-env", function, pickle("((), {})"), List.of(), recorder);
    assertFalse(assertInstanceOf(CallOutcome.Returned.class, outcome).raised(),
        recorder.stderr());
    var env = new io.vertx.core.json.JsonObject(recorder.stdout());
    for (String name : env.fieldNames()) {
      assertFalse(env.getString(name).contains("never-in-executors"), name + " leaked a secret");
      assertTrue(ExecutorEnvironment.passes(name) || OWN_VARIABLES.contains(name),
          name + " is not on the executor environment's allowlist");
    }
    assertFalse(env.containsKey("BULLETIN_OWNER_TOKEN") || env.containsKey("BULLETIN_WORKER_TOKEN")
        || env.containsKey("BULLETIN_GATEWAY_TOKEN"), env.fieldNames().toString());
    assertEquals(System.getenv("PATH"), env.getString("PATH"), "what Python needs still passes");
  }

  /** Set by the agent for each executor (docs/internals.md). */
  private static final java.util.Set<String> OWN_VARIABLES = java.util.Set.of(
      "BULLETIN_EXECUTOR_ID", "BULLETIN_STORE_DIR", "BULLETIN_STORE_CAPACITY",
      "CUDA_VISIBLE_DEVICES", "BULLETIN_SIMULATED_GPUS", "BULLETIN_RESIDENT_MAX_BYTES",
      "PYTHONUNBUFFERED");

  @Test
  void userCodeFindsNoPy4jCredentialThatReachesTheJvm() throws Exception {
    // Everything Py4J-ish in the executor's own memory, tried against the JVM.
    ObjectKey function = pickle("lambda: print(__import__('bulletin_reach_jvm').attempt())");
    writeReachJvmModule();
    Recorder recorder = new Recorder();
    CallOutcome outcome = run("t-py4j", function, pickle("((), {})"), List.of(), recorder);
    assertInstanceOf(CallOutcome.Returned.class, outcome);
    String printed = recorder.stdout();
    assertTrue(printed.startsWith("refused"), printed);
    assertFalse(printed.contains(System.getProperty("user.dir")), printed);
  }

  /**
   * A module the executor imports (on PYTHONPATH, which passes the allowlist): finds every py4j
   * gateway, client and parameter object and every port/token pair, and tries each as a client
   * of a Java gateway.
   */
  private void writeReachJvmModule() throws Exception {
    Files.writeString(harness.modules.resolve("bulletin_reach_jvm.py"), String.join("\n",
        "import gc, os",
        "from py4j.java_gateway import JavaGateway, GatewayParameters, GatewayClient",
        "def attempt():",
        "    tried = []",
        "    for obj in gc.get_objects():",
        "        try:",
        "            if isinstance(obj, JavaGateway):",
        "                return 'reached ' + obj.jvm.java.lang.System.getProperty('user.dir')",
        "            if isinstance(obj, (GatewayParameters, GatewayClient)):",
        "                params = getattr(obj, 'gateway_parameters', obj)",
        "                tried.append((params.port, params.auth_token))",
        "        except Exception:",
        "            pass",
        "    for name, value in os.environ.items():",
        "        if 'GATEWAY_PORT' in name:",
        "            tried.append((int(value), os.environ.get(name.replace('PORT', 'TOKEN'))))",
        "    for port, token in tried:",
        "        try:",
        "            gateway = JavaGateway(gateway_parameters=GatewayParameters(port=port,"
            + " auth_token=token))",
        "            return 'reached ' + gateway.jvm.java.lang.System.getProperty('user.dir')",
        "        except Exception:",
        "            pass",
        "    return 'refused after %d tries' % len(tried)",
        ""));
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
