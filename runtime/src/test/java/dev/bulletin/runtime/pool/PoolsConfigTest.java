package dev.bulletin.runtime.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.runtime.config.ConfigError;
import dev.bulletin.runtime.config.ConfigException;
import dev.bulletin.runtime.config.RuntimeConfig;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

class PoolsConfigTest {

  @TempDir Path folder;

  static final String FULL = """
      users:
        - name: ada
          token: ada-token-0123456789
      pools:
        - name: gpu
          provider: slurm
          worker: {gpus: 4, cpus: 16, memory: 64GiB, walltime: "04:00:00"}
          min_workers: 0
          max_workers: 8
          warm_workers: 1
          idle_timeout: 10m
          replace_before_expiry: 15m
          launch_backoff: {initial: 2s, max: 1m}
          python: /shared/venv/bin/python
          slurm:
            partition: gpu
            account: lab
            qos: normal
            extra_args: ["--constraint=a100"]
            log_dir: /shared/bulletin/logs
        - name: cpu-local
          provider: local
          worker: {cpus: 2}
          max_workers: 2
          local: {simulate_gpus: true, terminate_grace: 3s}
      """;

  @Test
  void aFullFileParsesWithUsersAndPools() throws Exception {
    Path file = folder.resolve("bulletin.yaml");
    Files.writeString(file, FULL);
    RuntimeConfig config = RuntimeConfig.load(file);
    assertEquals(1, config.users().size());
    List<PoolConfig> pools = config.pools().pools();
    assertEquals(2, pools.size());
    PoolConfig gpu = pools.get(0);
    assertEquals(ProviderKind.SLURM, gpu.provider());
    assertEquals(new WorkerShape(4, 16, 64L << 30, Duration.ofHours(4)), gpu.worker());
    assertEquals(8, gpu.maxWorkers());
    assertEquals(1, gpu.warmWorkers());
    assertEquals(Duration.ofMinutes(10), gpu.idleTimeout());
    assertEquals(Duration.ofMinutes(15), gpu.replaceBeforeExpiry());
    assertEquals(Duration.ofMinutes(5), gpu.startTimeout());
    assertEquals(Duration.ofSeconds(2), gpu.backoffInitial());
    assertEquals(Optional.of("gpu"), gpu.slurm().partition());
    assertEquals(List.of("--constraint=a100"), gpu.slurm().extraArgs());
    assertEquals(Optional.of("/shared/venv/bin/python"), gpu.python());
    PoolConfig local = pools.get(1);
    assertEquals(new WorkerShape(0, 2, 0, Duration.ZERO), local.worker());
    assertTrue(local.local().simulateGpus());
    assertEquals(Duration.ofSeconds(3), local.local().terminateGrace());
    assertEquals(Duration.ofMinutes(2), local.startTimeout());
  }

  @Test
  void aKubernetesPoolParsesEveryField() {
    PoolConfig pool = PoolsConfig.parseYaml("""
        pools:
          - name: a100
            provider: kubernetes
            worker: {gpus: 1, cpus: 8, memory: 32GiB}
            max_workers: 4
            kubernetes:
              namespace: gpu-jobs
              image: ghcr.io/lab/bulletin-worker:0.1
              gpu_resource: amd.com/gpu
              node_selector: {nvidia.com/gpu.product: A100}
              tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
              requests: {ephemeral-storage: 10Gi}
              limits: {cpu: "8"}
              service_account: bulletin-worker
              head: bulletin-head.gpu-jobs.svc:8770
              pending_timeout: 2m
              terminate_grace: 10s
              pod_template: {metadata: {labels: {team: vision}}, spec: {priorityClassName: batch}}
        """).pools().get(0);
    KubernetesOptions k = pool.kubernetes();
    assertEquals(ProviderKind.KUBERNETES, pool.provider());
    assertEquals(Optional.of("gpu-jobs"), k.namespace());
    assertEquals("amd.com/gpu", k.gpuResource());
    assertEquals(java.util.Map.of("nvidia.com/gpu.product", "A100"), k.nodeSelector());
    assertEquals(List.of(new KubernetesOptions.Toleration(Optional.of("nvidia.com/gpu"), "Exists",
        Optional.empty(), Optional.of("NoSchedule"), Optional.empty())), k.tolerations());
    assertEquals(java.util.Map.of("cpu", "8"), k.limits());
    assertEquals(Optional.of("bulletin-head.gpu-jobs.svc:8770"), k.head());
    assertEquals(Duration.ofMinutes(2), k.pendingTimeout());
    assertTrue(k.podTemplate().orElseThrow().contains("\"priorityClassName\":\"batch\""));
    assertEquals(Duration.ofMinutes(5), pool.startTimeout());
  }

  @Test
  void noPoolsSectionMeansNoPools() throws Exception {
    Path file = folder.resolve("bulletin.yaml");
    Files.writeString(file, "users: []\n");
    assertEquals(List.of(), RuntimeConfig.load(file).pools().pools());
    assertEquals(List.of(), RuntimeConfig.empty().pools().pools());
  }

  @Test
  void replaceBeforeExpiryDefaultsToAQuarterOfAShortWalltime() {
    PoolConfig pool = PoolsConfig.parseYaml("""
        pools:
          - {name: short, provider: slurm, worker: {gpus: 1, walltime: 20m}, max_workers: 1}
        """).pools().get(0);
    assertEquals(Duration.ofMinutes(5), pool.replaceBeforeExpiry());
  }

  static Stream<Arguments> badFiles() {
    return Stream.of(
        Arguments.of("unknown provider names the allowed ones", """
            pools: [{name: gpu, provider: nomad, worker: {gpus: 1}, max_workers: 2}]
            """, "pools[0] (gpu).provider: unknown provider 'nomad' (allowed: local, slurm, kubernetes)"),
        Arguments.of("kubernetes needs an image", """
            pools: [{name: gpu, provider: kubernetes, worker: {gpus: 1}, max_workers: 2,
                     kubernetes: {namespace: lab}}]
            """, "pools[0] (gpu).kubernetes.image is required for provider kubernetes"),
        Arguments.of("kubernetes namespace is a DNS label", """
            pools: [{name: gpu, provider: kubernetes, worker: {gpus: 1}, max_workers: 2,
                     kubernetes: {namespace: GPU_Jobs, image: w:1}}]
            """, "kubernetes.namespace: 'GPU_Jobs' is not a namespace name"),
        Arguments.of("kubernetes requests take no GPU", """
            pools: [{name: gpu, provider: kubernetes, worker: {gpus: 1}, max_workers: 2,
                     kubernetes: {image: w:1, requests: {nvidia.com/gpu: 1}}}]
            """, "kubernetes.requests: 'nvidia.com/gpu' is not one of [cpu, memory, ephemeral-storage]"),
        Arguments.of("typo in the kubernetes block", """
            pools: [{name: gpu, provider: kubernetes, worker: {gpus: 1}, max_workers: 2,
                     kubernetes: {image: w:1, node_selecter: {a: b}}}]
            """, "pools[0] (gpu).kubernetes: unknown field 'node_selecter'"),
        Arguments.of("max below min", """
            pools: [{name: gpu, provider: local, worker: {gpus: 1}, min_workers: 3, max_workers: 2}]
            """, "pools[0] (gpu).max_workers (2) must be >= min_workers (3)"),
        Arguments.of("negative gpus", """
            pools: [{name: gpu, provider: local, worker: {gpus: -1}, max_workers: 2}]
            """, "pools[0] (gpu).worker.gpus: must be >= 0, got -1"),
        Arguments.of("bad duration", """
            pools: [{name: gpu, provider: local, worker: {gpus: 1}, max_workers: 2, idle_timeout: soon}]
            """, "pools[0] (gpu).idle_timeout: 'soon' is not a duration; use a number with a unit"),
        Arguments.of("bad memory", """
            pools: [{name: gpu, provider: local, worker: {memory: lots}, max_workers: 2}]
            """, "pools[0] (gpu).worker.memory: 'lots' is not a size"),
        Arguments.of("slurm needs a walltime", """
            pools: [{name: gpu, provider: slurm, worker: {gpus: 1}, max_workers: 2}]
            """, "pools[0] (gpu).worker.walltime is required for provider slurm"),
        Arguments.of("max_workers is required", """
            pools: [{name: gpu, provider: local, worker: {gpus: 1}}]
            """, "pools[0] (gpu).max_workers: is required"),
        Arguments.of("typo in a field lists the known ones", """
            pools: [{name: gpu, provider: local, worker: {gpus: 1}, max_workers: 2, idle_timout: 5m}]
            """, "pools[0] (gpu): unknown field 'idle_timout' (allowed: name, provider, worker,"),
        Arguments.of("typo in the worker block", """
            pools: [{name: gpu, provider: local, worker: {gpu: 1}, max_workers: 2}]
            """, "pools[0] (gpu).worker: unknown field 'gpu' (allowed: gpus, cpus, memory, walltime)"),
        Arguments.of("slurm options on a local pool", """
            pools: [{name: gpu, provider: local, worker: {gpus: 1}, max_workers: 2, slurm: {partition: x}}]
            """, "pools[0] (gpu).slurm: options for provider slurm, but this pool's provider is local"),
        Arguments.of("reserved sbatch option", """
            pools: [{name: gpu, provider: slurm, worker: {gpus: 1, walltime: 1h}, max_workers: 2,
                     slurm: {extra_args: ["--time=5"]}}]
            """, "pools[0] (gpu).slurm.extra_args: '--time' is set by bulletin"),
        Arguments.of("replacement lead longer than the walltime", """
            pools: [{name: gpu, provider: slurm, worker: {gpus: 1, walltime: 10m}, max_workers: 2,
                     replace_before_expiry: 10m}]
            """, "pools[0] (gpu).replace_before_expiry (10m) must be shorter than worker.walltime (10m)"),
        Arguments.of("duplicate names", """
            pools: [{name: gpu, provider: local, max_workers: 1, worker: {}},
                    {name: gpu, provider: local, max_workers: 1, worker: {}}]
            """, "pools: the name 'gpu' is used twice"),
        Arguments.of("bad name", """
            pools: [{name: "my pool", provider: local, max_workers: 1, worker: {}}]
            """, "pools[0] (my pool).name: 'my pool' is not a pool name"),
        Arguments.of("not a list", """
            pools: {name: gpu}
            """, "pools: must be a list of pools"),
        Arguments.of("warm above max", """
            pools: [{name: gpu, provider: local, worker: {}, max_workers: 1, warm_workers: 2}]
            """, "pools[0] (gpu).warm_workers must be 0..max_workers (1), got 2"));
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("badFiles")
  void badPoolsAreRefusedNamingTheField(String name, String yaml, String expected) throws Exception {
    Path file = folder.resolve("bulletin.yaml");
    Files.writeString(file, yaml);
    IllegalArgumentException error =
        assertThrows(IllegalArgumentException.class, () -> RuntimeConfig.load(file));
    assertTrue(error.getMessage().contains(expected), "expected '" + expected + "' in: " + error.getMessage());
  }

  @Test
  void everyMistakeOfEveryPoolIsReportedWithItsPath() {
    ConfigException error = assertThrows(ConfigException.class, () -> PoolsConfig.parseYaml("""
        pools:
          - {name: gpu, provider: slurm, worker: {gpus: 1, walltime: soon}, max_workers: 2}
          - {name: cpu, provider: local, worker: {cpus: many}, max_workers: 0,
             slurm: {partition: x}}
        """));
    assertEquals(List.of(
        "pools[0] (gpu).worker.walltime: 'soon' is not a duration; use a number with a unit:"
            + " 500ms, 90s, 10m, 2h, 7d, 1h30m, 1h 30m; or Slurm's [D-]HH:MM[:SS]",
        "pools[1] (cpu).worker.cpus: expected an integer, got 'many'",
        "pools[1] (cpu).max_workers: must be >= 1, got 0",
        "pools[1] (cpu).slurm: options for provider slurm, but this pool's provider is local"),
        error.errors().stream().map(ConfigError::line).toList());
  }
}
