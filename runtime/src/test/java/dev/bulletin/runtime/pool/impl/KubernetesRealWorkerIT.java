package dev.bulletin.runtime.pool.impl;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.bulletin.runtime.pool.KubernetesOptions;
import dev.bulletin.runtime.pool.PoolConfig;
import dev.bulletin.runtime.pool.ProviderContext;
import dev.bulletin.runtime.pool.ProviderKind;
import dev.bulletin.runtime.pool.WorkerCommand;
import dev.bulletin.runtime.pool.WorkerHandle;
import dev.bulletin.runtime.pool.WorkerShape;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A Kubernetes pool's worker for real: the provider creates the Pod and its Secret on the real
 * API server, {@link FakeKubelet} (the simulated node) runs the Pod's command, a real
 * {@code python -m bulletin worker} with its environment from the Secret, which joins a real
 * runtime ({@code bulletin up}) and serves a GPU call; deleting the Pod stops it. Needs the
 * project's venv and jar, like {@link RealWorkerIT}.
 */
@Tag("kube") // run last by `make test` (test-kube), after the API server's build
class KubernetesRealWorkerIT {

  @TempDir Path dir;

  @Test
  void aPodsWorkerJoinsTheRealHeadServesAGpuCallAndGoesWithThePod() throws Exception {
    KubeTestCluster cluster = KubeTestCluster.get();
    // RealWorkerIT's runtime, in a home of this test's own (JUnit fills that field for its class only).
    RealWorkerIT.home = java.nio.file.Files.createDirectories(dir.resolve("home"));
    RealWorkerIT.up();
    try {
      String ns = cluster.namespace(KubeTestCluster.ROLE);
      ProviderContext context = new ProviderContext(RealWorkerIT.clusterId, RealWorkerIT.address,
          RealWorkerIT.workerToken, RealWorkerIT.python, dir.resolve("state"),
          WorkerCommand.bulletin());
      KubernetesOptions k = KubernetesOptions.defaults().withImage(ns, "bulletin-worker:test");
      k = new KubernetesOptions(k.namespace(), k.image(), k.gpuResource(), k.nodeSelector(),
          k.tolerations(), k.requests(), k.limits(), k.serviceAccount(), k.podTemplate(), k.head(),
          k.pendingTimeout(), k.terminateGrace(), true);
      PoolConfig pool = PoolConfig.kubernetes("k8s", new WorkerShape(1, 1, 1L << 30,
          Duration.ZERO), 0, 1, k);
      pool = new PoolConfig(pool.name(), pool.provider(), pool.worker(), 0, 1, 0,
          pool.idleTimeout(), pool.replaceBeforeExpiry(), pool.startTimeout(),
          pool.backoffInitial(), pool.backoffMax(), Optional.of(RealWorkerIT.python),
          pool.slurm(), pool.local(), k);
      try (KubernetesProvider provider = new KubernetesProvider(context, Set.of(ns),
          cluster.client(KubeTestCluster.RUNTIME_TOKEN, ns), true);
          FakeKubelet kubelet = new FakeKubelet(cluster, ns, dir)) {
        long start = System.nanoTime();
        WorkerHandle handle = provider.launch(pool, "k8s-w1").get(60, TimeUnit.SECONDS);
        String pod = handle.providerId().substring(ns.length() + 1);
        kubelet.start(pod, Map.of());
        SlurmProviderIT.waitFor(() -> RealWorkerIT.attached("k8s-w1"), RealWorkerIT.ATTACH,
            "the Pod's worker to attach (its output: " + dir.resolve(pod + ".log") + ")");
        System.out.printf("kubernetes worker: Pod created to attached %.2f s%n",
            (System.nanoTime() - start) / 1e9);
        Commands.Result call = Commands.run(List.of(RealWorkerIT.python, "-c", "import bulletin,"
            + " os; c = bulletin.Client(); print(c.submit(lambda:"
            + " os.environ['BULLETIN_SIMULATED_GPUS'] + '/' + os.environ['CUDA_VISIBLE_DEVICES'],"
            + " gpus=1).result(timeout=120))"), Map.of("BULLETIN_HOME",
            RealWorkerIT.home.toString()), Duration.ofMinutes(3));
        assertEquals("1/0", call.stdout().strip(), "a GPU call runs in the Pod's worker: "
            + call.stderr());
        provider.terminate(handle).get(60, TimeUnit.SECONDS);
        SlurmProviderIT.waitFor(() -> !RealWorkerIT.attached("k8s-w1"), RealWorkerIT.ATTACH,
            "the worker to detach once its Pod is deleted");
      }
    } finally {
      RealWorkerIT.down();
    }
  }
}
