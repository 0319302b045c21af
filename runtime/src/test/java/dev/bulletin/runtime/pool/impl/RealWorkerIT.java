package dev.bulletin.runtime.pool.impl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.bulletin.runtime.pool.LocalOptions;
import dev.bulletin.runtime.pool.PoolConfig;
import dev.bulletin.runtime.pool.ProviderContext;
import dev.bulletin.runtime.pool.ProviderKind;
import dev.bulletin.runtime.pool.SlurmOptions;
import dev.bulletin.runtime.pool.WorkerCommand;
import dev.bulletin.runtime.pool.WorkerHandle;
import dev.bulletin.runtime.pool.WorkerProvider;
import dev.bulletin.runtime.pool.WorkerShape;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The providers with the real worker command ({@code python -m bulletin worker}) against a real
 * runtime ({@code bulletin up} with no GPU of its own): the worker each provider starts attaches,
 * serves a GPU call, and goes away when the provider stops it. Prints launch-to-attached times.
 * Needs the project's venv and jar (make build; the Makefile exports both locations).
 */
class RealWorkerIT {

  static final Duration ATTACH = Duration.ofSeconds(90);
  @TempDir static Path home;
  static String python;
  static String address;
  static String workerToken;
  static String clusterId;

  @BeforeAll
  static void up() throws Exception {
    python = System.getenv("BULLETIN_TEST_PYTHON");
    String jar = System.getenv("BULLETIN_JAR");
    Assumptions.assumeTrue(python != null && Files.isExecutable(Path.of(python)) && jar != null
        && Files.isRegularFile(Path.of(jar)), "needs BULLETIN_TEST_PYTHON and BULLETIN_JAR (run"
        + " through make test, after make build)");
    Commands.Result up = cli("up", "--simulate-gpus", "0", "--cpus", "1", "--port", "0");
    assertEquals(0, up.exitCode(), up.stdout() + up.stderr());
    Map<?, ?> state = new ObjectMapper().readValue(home.resolve("runtime.json").toFile(), Map.class);
    address = (String) state.get("address");
    clusterId = (String) state.get("cluster_id");
    workerToken = Files.readString(home.resolve("worker-token")).strip();
  }

  @AfterAll
  static void down() {
    if (address != null) {
      cli("down");
    }
  }

  static Commands.Result cli(String... args) {
    List<String> argv = new java.util.ArrayList<>(List.of(python, "-m", "bulletin"));
    argv.addAll(List.of(args));
    return Commands.run(argv, Map.of("BULLETIN_HOME", home.toString()), Duration.ofMinutes(2));
  }

  static boolean attached(String workerId) {
    Commands.Result status = cli("status");
    return status.ok() && status.stdout().lines().anyMatch(l -> l.startsWith(workerId + " "));
  }

  ProviderContext context() {
    return new ProviderContext(clusterId, address, workerToken, python, home.resolve("pools"),
        WorkerCommand.bulletin());
  }

  void launchServeStop(WorkerProvider provider, PoolConfig pool, String workerId) throws Exception {
    long start = System.nanoTime();
    WorkerHandle handle = provider.launch(pool, workerId).get(60, TimeUnit.SECONDS);
    SlurmProviderIT.waitFor(() -> attached(workerId), ATTACH, workerId + " to attach");
    System.out.printf("%s worker: launch to attached %.2f s%n", pool.provider().configName(),
        (System.nanoTime() - start) / 1e9);
    Commands.Result call = Commands.run(List.of(python, "-c", "import bulletin, os;"
        + " c = bulletin.Client(); print(c.submit(lambda: os.environ['BULLETIN_SIMULATED_GPUS'] + '/'"
        + " + os.environ['CUDA_VISIBLE_DEVICES'], gpus=1).result(timeout=120))"),
        Map.of("BULLETIN_HOME", home.toString()), Duration.ofMinutes(3));
    assertEquals("1/0", call.stdout().strip(), "a GPU call runs on the pool's worker: " + call.stderr());
    provider.terminate(handle).get(60, TimeUnit.SECONDS);
    SlurmProviderIT.waitFor(() -> !attached(workerId), ATTACH, workerId + " to detach once stopped");
  }

  @Test
  void aLocalPoolWorkerAttachesServesAndStops() throws Exception {
    PoolConfig pool = PoolConfig.of("local", ProviderKind.LOCAL, new WorkerShape(1, 1, 1L << 30,
        Duration.ZERO), 0, 1).withLocal(new LocalOptions(true, Duration.ofSeconds(10)));
    try (LocalProvider provider = new LocalProvider(context())) {
      launchServeStop(provider, pool, "local-w1");
    }
  }

  @Test
  void aSlurmPoolWorkerAttachesServesAndStops() throws Exception {
    SlurmTestCluster.ensure();
    PoolConfig pool = PoolConfig.of("gpu", ProviderKind.SLURM, new WorkerShape(1, 1, 1L << 30,
        Duration.ofMinutes(10)), 0, 1).withSlurm(new SlurmOptions(Optional.of(SlurmTestCluster.PARTITION),
        Optional.empty(), Optional.empty(), List.of(), true, Optional.empty()));
    try (SlurmProvider provider = new SlurmProvider(context())) {
      launchServeStop(provider, pool, "gpu-w1");
      String log = Files.list(home.resolve("pools/slurm/logs")).map(Path::toString)
          .filter(p -> p.contains("gpu-w1-")).findFirst().orElseThrow();
      assertTrue(Files.readString(Path.of(log)).contains("attached to " + address),
          "the job's output is in the pool's log folder: " + log);
    } finally {
      SlurmTestCluster.cancelAll(clusterId);
    }
  }
}
