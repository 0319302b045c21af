package dev.bulletin.runtime.pool.impl;

import static dev.bulletin.runtime.pool.impl.SlurmProviderIT.sha256;
import static dev.bulletin.runtime.pool.impl.SlurmProviderIT.waitFor;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.runtime.pool.LocalOptions;
import dev.bulletin.runtime.pool.PoolConfig;
import dev.bulletin.runtime.pool.ProvidedWorker;
import dev.bulletin.runtime.pool.ProviderContext;
import dev.bulletin.runtime.pool.ProviderKind;
import dev.bulletin.runtime.pool.WorkerCommand;
import dev.bulletin.runtime.pool.WorkerHandle;
import dev.bulletin.runtime.pool.WorkerShape;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The local provider with real processes: a stand-in worker that also starts a child. */
class LocalProviderIT {

  static final String TOKEN = "worker-token-" + UUID.randomUUID();

  @TempDir Path dir;
  ProviderContext context;
  LocalProvider provider;

  /** Records its arguments, its token's hash and a child's pid, prints a line, then sleeps. */
  static WorkerCommand standIn(Path out) {
    String script = "d=" + Commands.shellQuote(out.toString()) + "\n"
        + "printf '%s' \"$BULLETIN_WORKER_TOKEN\" | sha256sum | cut -d' ' -f1 > \"$d/$$.token\"\n"
        + "sleep 600 & echo $! > \"$d/$$.child\"\n"
        + "echo \"stand-in worker $$ up\"\n"
        + "printf '%s\\n' \"$@\" > \"$d/$$.args.tmp\"; mv \"$d/$$.args.tmp\" \"$d/$$.args\"\n"
        + "exec sleep 600\n";
    return new WorkerCommand(List.of("/bin/bash", "-c", script, "stand-in"));
  }

  @BeforeEach
  void setUp() {
    context = new ProviderContext("lt" + UUID.randomUUID().toString().substring(0, 6),
        "127.0.0.1:8770", TOKEN, "/usr/bin/python3", dir.resolve("state"), standIn(dir));
    provider = new LocalProvider(context);
  }

  @AfterEach
  void tearDown() throws Exception {
    for (ProvidedWorker w : provider.list().get(30, TimeUnit.SECONDS)) {
      provider.terminate(w.handle()).get(30, TimeUnit.SECONDS);
    }
    provider.close();
  }

  static PoolConfig pool(Duration walltime) {
    return PoolConfig.of("cpu", ProviderKind.LOCAL, new WorkerShape(2, 1, 0, walltime), 0, 2)
        .withLocal(new LocalOptions(true, Duration.ofSeconds(2)));
  }

  @Test
  void launchesListsAfterARestartAndStopsTheWholeProcessGroup() throws Exception {
    long start = System.nanoTime();
    WorkerHandle handle = provider.launch(pool(Duration.ZERO), "cpu-w1").get(30, TimeUnit.SECONDS);
    long pid = Long.parseLong(handle.providerId());
    Path args = dir.resolve(pid + ".args");
    waitFor(() -> Files.exists(args), Duration.ofSeconds(30), "the worker command to run");
    System.out.printf("local worker start (launch to the command running): %.3f s%n",
        (System.nanoTime() - start) / 1e9);

    assertEquals(List.of("--head", "127.0.0.1:8770", "--pool", "cpu", "--worker-id", "cpu-w1",
        "--simulate-gpus", "2", "--cpus", "1"), Files.readAllLines(args));
    assertEquals(sha256(TOKEN), Files.readString(dir.resolve(pid + ".token")).strip());
    String stat = Files.readString(Path.of("/proc/" + pid + "/stat"));
    String[] fields = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
    assertEquals(Long.toString(pid), fields[2], "the worker leads its own process group");
    long child = Long.parseLong(Files.readString(dir.resolve(pid + ".child")).strip());
    assertTrue(ProcessHandle.of(child).map(ProcessHandle::isAlive).orElse(false));
    assertTrue(Files.readString(provider.logOf("cpu-w1")).contains("stand-in worker " + pid + " up"),
        "output goes to the worker's log file");

    provider.close();
    provider = new LocalProvider(context); // a restarted runtime
    List<ProvidedWorker> listed = provider.list().get(30, TimeUnit.SECONDS);
    assertEquals(List.of(new ProvidedWorker(handle, true, java.util.Optional.empty())), listed);

    provider.terminate(handle).get(30, TimeUnit.SECONDS);
    assertFalse(ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false), "the worker is gone");
    waitFor(() -> !ProcessHandle.of(child).map(ProcessHandle::isAlive).orElse(false),
        Duration.ofSeconds(10), "the worker's child to be gone too");
    assertEquals(List.of(), provider.list().get(30, TimeUnit.SECONDS));
  }

  @Test
  void aWorkerThatIgnoresSigtermIsKilledAfterTheGrace() throws Exception {
    String script = "trap '' TERM; echo started > " + Commands.shellQuote(dir.resolve("up").toString())
        + "; while true; do sleep 1; done";
    LocalProvider stubborn = new LocalProvider(new ProviderContext(context.clusterId(),
        "127.0.0.1:8770", TOKEN, "/usr/bin/python3", dir.resolve("state"),
        new WorkerCommand(List.of("/bin/bash", "-c", script, "stand-in"))));
    try {
      WorkerHandle handle = stubborn.launch(pool(Duration.ZERO), "cpu-w2").get(30, TimeUnit.SECONDS);
      waitFor(() -> Files.exists(dir.resolve("up")), Duration.ofSeconds(30), "the worker to start");
      long start = System.nanoTime();
      stubborn.terminate(handle).get(30, TimeUnit.SECONDS);
      double took = (System.nanoTime() - start) / 1e9;
      assertFalse(ProcessHandle.of(Long.parseLong(handle.providerId())).map(ProcessHandle::isAlive)
          .orElse(false));
      assertTrue(took >= 1.5, "SIGKILL came only after the 2s grace, took " + took + "s");
    } finally {
      stubborn.close();
    }
  }

  @Test
  void aWalltimeIsPassedAndEnforced() throws Exception {
    Instant before = Instant.now();
    WorkerHandle handle = provider.launch(pool(Duration.ofSeconds(3)), "cpu-w3").get(30, TimeUnit.SECONDS);
    long pid = Long.parseLong(handle.providerId());
    waitFor(() -> Files.exists(dir.resolve(pid + ".args")), Duration.ofSeconds(30), "the worker to start");
    List<String> argv = Files.readAllLines(dir.resolve(pid + ".args"));
    long expiresAt = Long.parseLong(argv.get(argv.indexOf("--expires-at") + 1));
    assertTrue(Math.abs(expiresAt - before.plusSeconds(3).getEpochSecond()) <= 1, argv.toString());
    assertTrue(provider.list().get(30, TimeUnit.SECONDS).get(0).expiresAt().isPresent());
    waitFor(() -> !ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false),
        Duration.ofSeconds(20), "the worker to be stopped at its walltime");
    assertEquals(List.of(), provider.list().get(30, TimeUnit.SECONDS));
  }
}
