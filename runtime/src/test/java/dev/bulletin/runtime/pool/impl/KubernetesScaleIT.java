package dev.bulletin.runtime.pool.impl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.runtime.pool.KubernetesOptions;
import dev.bulletin.runtime.pool.PoolConfig;
import dev.bulletin.runtime.pool.PoolsConfig;
import dev.bulletin.runtime.pool.ProviderContext;
import dev.bulletin.runtime.pool.ProviderKind;
import dev.bulletin.runtime.pool.RegisteredWorker;
import dev.bulletin.runtime.pool.WorkerCommand;
import dev.bulletin.runtime.pool.WorkerHandle;
import dev.bulletin.runtime.pool.WorkerProvider;
import dev.bulletin.runtime.pool.WorkerShape;
import io.fabric8.kubernetes.api.model.Pod;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The measure: the autoscaler's pass with 1,000 Pods in the provider's watch cache, on
 * the real API server. The Pods are made by the test (as an earlier runtime would have) and
 * adopted from the journal; nothing runs in them (no kubelet).
 */
@Tag("kube") // run last by `make test` (test-kube), after the API server's build
class KubernetesScaleIT {
  static final int PODS = 1000;

  @TempDir Path dir;

  @Test
  void aPassWithAThousandPodsInTheCacheTakesMilliseconds() throws Exception {
    KubeTestCluster cluster = KubeTestCluster.get();
    String ns = cluster.namespace(KubeTestCluster.ROLE);
    ProviderContext context = new ProviderContext("scale" + UUID.randomUUID().toString()
        .substring(0, 4), "10.1.2.3:8770", "worker-token-x", "/usr/bin/python3",
        dir.resolve("state"), WorkerCommand.bulletin());
    PoolConfig pool = PoolConfig.kubernetes("gpu", new WorkerShape(1, 1, 0, Duration.ZERO), 0,
        PODS, KubernetesOptions.defaults().withImage(ns, "lab/worker:1"));
    List<WorkerHandle> journaled = new ArrayList<>();
    ExecutorService creators = Executors.newFixedThreadPool(8);
    long made = System.nanoTime();
    List<Future<?>> creating = new ArrayList<>();
    for (int i = 0; i < PODS; i++) {
      String worker = "gpu-" + i;
      Pod pod = WorkerPods.pod(context, pool, worker, ns);
      journaled.add(new WorkerHandle(ProviderKind.KUBERNETES, "gpu", worker, ns + "/"
          + pod.getMetadata().getName()));
      creating.add(creators.submit(() -> cluster.admin.pods().inNamespace(ns).resource(pod).create()));
    }
    for (Future<?> f : creating) {
      f.get(120, TimeUnit.SECONDS);
    }
    creators.shutdown();
    System.out.printf("%d Pods created in %.1f s%n", PODS, (System.nanoTime() - made) / 1e9);

    Map<ProviderKind, WorkerProvider> providers = Map.of(ProviderKind.KUBERNETES,
        new KubernetesProvider(context, Set.of(ns), cluster.client(KubeTestCluster.RUNTIME_TOKEN, ns), true));
    long adopt = System.nanoTime();
    AutoscalerHarness h = new AutoscalerHarness(new PoolsConfig(List.of(pool)), providers,
        journaled, Duration.ZERO);
    try {
      System.out.printf("start (watch synced, %d adopted) in %.0f ms%n", PODS,
          (System.nanoTime() - adopt) / 1e6);
      assertEquals(PODS, h.events("adopted").size());
      List<RegisteredWorker> registered = new ArrayList<>();
      for (int i = 0; i < PODS; i++) {
        registered.add(RegisteredWorker.busy("gpu-" + i, 1, h.clock.instant()));
      }
      long[] ticks = new long[50];
      for (int i = 0; i < ticks.length; i++) {
        long t = System.nanoTime();
        h.tick(registered, List.of());
        ticks[i] = System.nanoTime() - t;
        h.onOwner(() -> {
          h.clock.advance(Duration.ofSeconds(1));
          return null;
        });
      }
      long list = System.nanoTime();
      int listed = providers.get(ProviderKind.KUBERNETES).list().get(30, TimeUnit.SECONDS).size();
      long listNanos = System.nanoTime() - list;
      long status = System.nanoTime();
      h.onOwner(() -> h.autoscaler.status());
      long statusNanos = System.nanoTime() - status;
      Arrays.sort(ticks);
      System.out.printf("autoscaler pass with %d Pods: median %.2f ms, max %.2f ms; provider"
          + " list (cache) %.2f ms; status %.2f ms%n", PODS, ticks[ticks.length / 2] / 1e6,
          ticks[ticks.length - 1] / 1e6, listNanos / 1e6, statusNanos / 1e6);
      assertEquals(PODS, listed);
      assertEquals(PODS, h.events("registered").size(), "every adopted Pod's worker counted");
      assertTrue(ticks[ticks.length / 2] < 200_000_000L, "a pass stays well under the 1 s tick");
    } finally {
      // The Pods stay in their namespace (no test reuses it); the watch and the client close.
      h.onOwner(() -> h.autoscaler.shutdown(false)).get(30, TimeUnit.SECONDS);
      h.owner.shutdownNow();
    }
  }
}
