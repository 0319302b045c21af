package dev.bulletin.runtime.pool.impl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.runtime.pool.KubernetesOptions;
import dev.bulletin.runtime.pool.PendingDemand;
import dev.bulletin.runtime.pool.PoolConfig;
import dev.bulletin.runtime.pool.PoolEvent;
import dev.bulletin.runtime.pool.PoolStatus;
import dev.bulletin.runtime.pool.PoolsConfig;
import dev.bulletin.runtime.pool.ProviderContext;
import dev.bulletin.runtime.pool.ProviderException;
import dev.bulletin.runtime.pool.ProviderKind;
import dev.bulletin.runtime.pool.RegisteredWorker;
import dev.bulletin.runtime.pool.WorkerCommand;
import dev.bulletin.runtime.pool.WorkerHandle;
import dev.bulletin.runtime.pool.WorkerProvider;
import dev.bulletin.runtime.pool.WorkerShape;
import dev.bulletin.runtime.workers.PoolJournal;
import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.EnvVar;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.Quantity;
import io.fabric8.kubernetes.api.model.Secret;
import io.fabric8.kubernetes.client.utils.Serialization;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The Kubernetes provider, alone and under the autoscaler, against a real kube-apiserver and etcd
 * ({@link KubeTestCluster}) with RBAC: the runtime's client has only the Role of docs/pools.md.
 * There is no scheduler or kubelet: {@link FakeKubelet} plays them, through the API.
 */
@Tag("kube") // run last by `make test` (test-kube), after the API server's build
class KubernetesProviderIT {
  static final Duration LONG = Duration.ofSeconds(30);
  /** The autoscaler lists its providers every 2 s of its (fake) clock. */
  static final Duration LIST_STEP = Duration.ofSeconds(3);
  static final String TOKEN = "worker-token-" + UUID.randomUUID();
  static final String IMAGE = "registry.example/lab/bulletin-worker:0.1";

  @TempDir Path dir;
  KubeTestCluster cluster;
  String ns;
  String clusterId;
  ProviderContext context;
  FakeKubelet kubelet;

  @BeforeEach
  void setUp() {
    cluster = KubeTestCluster.get();
    ns = cluster.namespace(KubeTestCluster.ROLE);
    clusterId = "k" + UUID.randomUUID().toString().substring(0, 6);
    context = new ProviderContext(clusterId, "10.1.2.3:8770", TOKEN, "/usr/bin/python3",
        dir.resolve("state"), WorkerCommand.bulletin(),
        (workerId, ttl) -> Optional.of("join-secret-of-" + workerId));
    kubelet = new FakeKubelet(cluster, ns, dir);
  }

  @AfterEach
  void tearDown() {
    if (kubelet != null) {
      kubelet.close();
    }
  }

  static PoolConfig pool(String name, String ns, Duration pendingTimeout) {
    KubernetesOptions k = new KubernetesOptions(Optional.of(ns), Optional.of(IMAGE),
        "nvidia.com/gpu", Map.of("nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"),
        List.of(new KubernetesOptions.Toleration(Optional.of("nvidia.com/gpu"), "Exists",
            Optional.empty(), Optional.of("NoSchedule"), Optional.empty())),
        Map.of(), Map.of("cpu", "4"), Optional.of("bulletin-worker"), Optional.empty(),
        Optional.empty(), pendingTimeout, Duration.ofSeconds(5), false);
    return PoolConfig.kubernetes(name, new WorkerShape(2, 4, 8L << 30, Duration.ZERO), 0, 2, k);
  }

  KubernetesProvider provider(String token) {
    return new KubernetesProvider(context, Set.of(ns), cluster.client(token, ns), true);
  }

  AutoscalerHarness harness(PoolsConfig pools, List<WorkerHandle> journaled) throws Exception {
    Map<ProviderKind, WorkerProvider> providers = Map.of(ProviderKind.KUBERNETES,
        provider(KubeTestCluster.RUNTIME_TOKEN));
    return new AutoscalerHarness(pools, providers, journaled, Duration.ofSeconds(60));
  }

  static String podName(WorkerHandle handle) {
    return handle.providerId().substring(handle.providerId().indexOf('/') + 1);
  }

  static String podOf(PoolEvent launched) {
    String m = launched.message();
    return m.substring(m.indexOf('/') + 1, m.indexOf(')'));
  }

  record Launched(String worker, String pod) {}

  /** Demand for one GPU: the pool launches a worker Pod, which the simulated node runs. */
  Launched launchRunning(AutoscalerHarness h) throws Exception {
    h.tick(List.of(), List.of(PendingDemand.of(1, 2)));
    PoolEvent launched = h.await("launched", LONG);
    String pod = podOf(launched);
    kubelet.bind(pod);
    kubelet.running(pod);
    return new Launched(launched.workerId().orElseThrow(), pod);
  }

  @Test
  void thePodAsksForTheGpusOnTheSelectedNodesAndKeepsTheTokensInItsSecret() throws Exception {
    try (KubernetesProvider provider = provider(KubeTestCluster.RUNTIME_TOKEN)) {
      WorkerHandle handle = provider.launch(pool("gpu", ns, Duration.ofMinutes(5)), "gpu-w1")
          .get(60, TimeUnit.SECONDS);
      assertEquals(ns + "/bulletin-" + clusterId + "-gpu-w1", handle.providerId());
      assertTrue(PoolJournal.record(handle, true).handle().startsWith("K8S:" + ns + "/"),
          "journaled as K8S:namespace/name");
      Pod pod = kubelet.pod(podName(handle));
      assertEquals(Map.of("bulletin.dev/cluster", clusterId, "bulletin.dev/pool", "gpu",
          "bulletin.dev/worker", "gpu-w1"), pod.getMetadata().getLabels());
      Container c = pod.getSpec().getContainers().get(0);
      assertEquals(IMAGE, c.getImage());
      assertEquals(List.of("python3"), c.getCommand());
      assertEquals(List.of("-m", "bulletin", "worker", "--head", "$(BULLETIN_HEAD)", "--pool", "gpu",
          "--worker-id", "gpu-w1", "--gpus", "2", "--cpus", "4", "--memory", "8GiB"), c.getArgs());
      assertEquals(new Quantity("2"), c.getResources().getRequests().get("nvidia.com/gpu"));
      assertEquals(new Quantity("2"), c.getResources().getLimits().get("nvidia.com/gpu"));
      assertEquals(new Quantity("4"), c.getResources().getRequests().get("cpu"));
      assertEquals(new Quantity("4"), c.getResources().getLimits().get("cpu"));
      assertEquals(new Quantity(Long.toString(8L << 30)), c.getResources().getLimits().get("memory"));
      assertEquals(Map.of("nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"), pod.getSpec().getNodeSelector());
      assertEquals("nvidia.com/gpu", pod.getSpec().getTolerations().get(0).getKey());
      assertEquals("NoSchedule", pod.getSpec().getTolerations().get(0).getEffect());
      assertEquals("bulletin-worker", pod.getSpec().getServiceAccountName());
      assertEquals("Never", pod.getSpec().getRestartPolicy());
      for (EnvVar var : c.getEnv()) {
        assertNull(var.getValue(), var.getName() + " comes from the Secret, not in clear");
        assertEquals(podName(handle), var.getValueFrom().getSecretKeyRef().getName());
      }
      String spec = Serialization.asJson(pod);
      assertFalse(spec.contains(TOKEN), "the worker token is not in the Pod");
      assertFalse(spec.contains("join-secret-of-"), "the join token is not in the Pod");

      Secret secret = cluster.admin.secrets().inNamespace(ns).withName(podName(handle)).get();
      assertEquals(pod.getMetadata().getUid(), secret.getMetadata().getOwnerReferences().get(0).getUid(),
          "the Pod owns its Secret: Kubernetes removes both together");
      Map<String, String> env = Map.of("BULLETIN_HEAD", "10.1.2.3:8770", "BULLETIN_WORKER_TOKEN",
          TOKEN, "BULLETIN_JOIN_TOKEN", "join-secret-of-gpu-w1");
      env.forEach((key, value) -> assertEquals(value, new String(java.util.Base64.getDecoder()
          .decode(secret.getData().get(key))), key));

      provider.terminate(handle).get(60, TimeUnit.SECONDS);
      SlurmProviderIT.waitFor(() -> kubelet.pods().isEmpty(), LONG, "the Pod to be deleted");
      assertNull(cluster.admin.secrets().inNamespace(ns).withName(podName(handle)).get(),
          "its Secret goes with it");
    }
  }

  @Test
  void theAutoscalerScalesUpOnDemandAndDownWhenIdle() throws Exception {
    try (AutoscalerHarness h = harness(new PoolsConfig(List.of(pool("gpu", ns, Duration.ofMinutes(5)))),
        List.of())) {
      Launched running = launchRunning(h);
      String worker = running.worker();
      String pod = running.pod();
      h.tick(List.of(RegisteredWorker.busy(worker, 1, h.clock.instant())), List.of());
      assertEquals(1, h.events("registered").size());
      assertEquals(1, h.events("launch").size(), "one Pod for one call");

      h.onOwner(() -> {
        h.clock.advance(Duration.ofMinutes(6));
        return null;
      });
      h.tick(List.of(RegisteredWorker.idle(worker, h.clock.instant().minus(Duration.ofMinutes(6)))),
          List.of());
      assertTrue(h.events("terminate").get(0).message().startsWith("idle for 6m"),
          h.events("terminate").toString());
      // The Pod is bound: the API server marks it, the (fake) kubelet finishes the deletion.
      SlurmProviderIT.waitFor(() -> kubelet.pods().isEmpty(), LONG, "the idle worker's Pod to go");
      SlurmProviderIT.waitFor(() -> cluster.admin.secrets().inNamespace(ns).list().getItems()
          .isEmpty(), LONG, "its Secret to go");
    }
  }

  @Test
  void aPodPendingPastItsTimeoutIsReportedWithTheSchedulersReasonDeletedAndRetried() throws Exception {
    String why = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: 0/3 nodes"
        + " are available: 3 No preemption victims found for incoming pod.";
    try (AutoscalerHarness h = harness(new PoolsConfig(List.of(pool("gpu", ns, Duration.ofSeconds(3)))),
        List.of())) {
      List<PendingDemand> call = List.of(PendingDemand.of(1, 2));
      h.tick(List.of(), call);
      String pod = podOf(h.await("launched", LONG));
      kubelet.unschedulable(pod, why);
      SlurmProviderIT.waitFor(() -> status(h).problem().orElse("").contains(why), LONG,
          "the pool's status to say why its Pod waits");
      assertTrue(status(h).problem().get().startsWith("Pod " + pod + " waits for a node:"
          + " Unschedulable: 0/3 nodes"), status(h).problem().get());

      PoolEvent failed = h.await("launch-failed", e -> true, List.of(), call, LONG, LIST_STEP);
      assertTrue(failed.message().contains("was not scheduled within its pending timeout (3s)"
          + ": Unschedulable: " + why), failed.message());
      assertTrue(failed.message().contains("next attempt in 5s"), failed.message());
      assertTrue(status(h).problem().orElse("").contains(why), "the status says it while backing off");
      SlurmProviderIT.waitFor(() -> kubelet.pod(pod) == null, LONG, "the pending Pod to be deleted");

      h.onOwner(() -> {
        h.clock.advance(Duration.ofSeconds(6));
        return null;
      });
      h.tick(List.of(), call);
      PoolEvent again = h.await("launched", e -> !podOf(e).equals(pod), List.of(), call, LONG);
      assertFalse(podOf(again).equals(pod), "retried with a new Pod after the backoff");
    }
  }

  @Test
  void anEvictedPodIsNoticedFromTheWatchAndItsCallsRequeued() throws Exception {
    try (AutoscalerHarness h = harness(new PoolsConfig(List.of(pool("gpu", ns, Duration.ofMinutes(5)))),
        List.of())) {
      Launched running = launchRunning(h);
      String worker = running.worker();
      String pod = running.pod();
      RegisteredWorker busy = RegisteredWorker.busy(worker, 1, h.clock.instant());
      h.tick(List.of(busy), List.of());

      kubelet.failed(pod, "Evicted", "The node was low on resource: memory.");
      PoolEvent exited = h.await("exited", e -> true, List.of(busy), List.of(), LONG, LIST_STEP);
      assertTrue(exited.message().contains("Pod " + ns + "/" + pod + " failed: Evicted (The node"
          + " was low on resource: memory.)"), exited.message());
      assertEquals(List.of(worker), h.onOwner(() -> List.copyOf(h.stopping)),
          "the runtime is told to forget the worker and requeue its calls");
      SlurmProviderIT.waitFor(() -> kubelet.pod(pod) == null, LONG, "the failed Pod to be deleted");
    }
  }

  /** What a container whose image lacks the worker says before it exits 1. */
  static final List<String> NO_MODULE = List.of("sh", "-c", "echo 'starting the worker';"
      + " echo \"ModuleNotFoundError: No module named 'bulletin'\" >&2; exit 1");

  @Test
  void aPodThatFailsAtStartIsReportedWithTheLastLinesOfItsLog() throws Exception {
    try (AutoscalerHarness h = harness(new PoolsConfig(List.of(pool("gpu", ns, Duration.ofMinutes(5)))),
        List.of())) {
      List<PendingDemand> call = List.of(PendingDemand.of(1, 2));
      h.tick(List.of(), call);
      String pod = podOf(h.await("launched", LONG));
      // The simulated node runs it; the API server reads its log from the node (FakeKubeletNode).
      kubelet.start(pod, Map.of(), NO_MODULE);

      PoolEvent failed = h.await("launch-failed", e -> true, List.of(), call, LONG, LIST_STEP);
      String said = "Pod " + ns + "/" + pod + " failed: Error (exit code 1); its last output:"
          + " starting the worker | ModuleNotFoundError: No module named 'bulletin'";
      assertTrue(failed.message().contains(said), failed.message());
      assertTrue(status(h).problem().orElse("").contains(said), "the pool's status says it: "
          + status(h).problem());
      SlurmProviderIT.waitFor(() -> kubelet.pod(pod) == null, LONG, "the failed Pod to be deleted");
    }
  }

  @Test
  void aLogThatCannotBeReadNamesWhyInsteadOfTheOutput() throws Exception {
    String limited = cluster.namespace(KubeTestCluster.ROLE.stream()
        .filter(r -> !r.getResources().contains("pods/log")).toList());
    try (KubernetesProvider provider = new KubernetesProvider(context, Set.of(limited),
        cluster.client(KubeTestCluster.RUNTIME_TOKEN, limited), true);
        FakeKubelet node = new FakeKubelet(cluster, limited, dir)) {
      WorkerHandle handle = provider.launch(pool("gpu", limited, Duration.ofMinutes(5)), "gpu-w1")
          .get(60, TimeUnit.SECONDS);
      node.start(podName(handle), Map.of(), NO_MODULE);
      SlurmProviderIT.waitFor(() -> node.pod(podName(handle)) == null, LONG,
          "the failed Pod to be deleted");
      assertEquals(Optional.of("Pod " + handle.providerId() + " failed: Error (exit code 1); its"
          + " log could not be read: the runtime's Kubernetes account lacks the permission 'get'"
          + " on 'pods/log' in namespace " + limited + " (the Role of docs/pools.md grants it)"),
          provider.whyGone(handle));
    }
  }

  @Test
  void aPodOnANodeThatDoesNotAnswerIsReportedWithoutItsLog() throws Exception {
    int closed;
    try (java.net.ServerSocket socket = new java.net.ServerSocket(0)) {
      closed = socket.getLocalPort();
    }
    String node = "gone-" + UUID.randomUUID().toString().substring(0, 6);
    cluster.admin.nodes().resource(new io.fabric8.kubernetes.api.model.NodeBuilder()
        .withNewMetadata().withName(node).endMetadata().withNewStatus().addNewAddress()
        .withType("InternalIP").withAddress("127.0.0.1").endAddress().withNewDaemonEndpoints()
        .withNewKubeletEndpoint().withPort(closed).endKubeletEndpoint().endDaemonEndpoints()
        .endStatus().build()).create();
    try (KubernetesProvider provider = provider(KubeTestCluster.RUNTIME_TOKEN)) {
      WorkerHandle handle = provider.launch(pool("gpu", ns, Duration.ofMinutes(5)), "gpu-w1")
          .get(60, TimeUnit.SECONDS);
      kubelet.bind(podName(handle), node);
      kubelet.failed(podName(handle), null, null);
      SlurmProviderIT.waitFor(() -> kubelet.pod(podName(handle)) == null, LONG,
          "the failed Pod to be deleted");
      String why = provider.whyGone(handle).orElseThrow();
      assertTrue(why.startsWith("Pod " + handle.providerId() + " failed; its log could not be"
          + " read: HTTP 500: "), why);
      assertTrue(why.contains("127.0.0.1:" + closed) && why.contains("connection refused"), why);
    } finally {
      cluster.admin.nodes().withName(node).delete();
    }
  }

  @Test
  void aRestartAdoptsTheJournaledPodAndDeletesOneOfNoConfiguredPool() throws Exception {
    PoolsConfig pools = new PoolsConfig(List.of(pool("gpu", ns, Duration.ofMinutes(5))));
    AutoscalerHarness first = harness(pools, List.of());
    first.tick(List.of(), List.of(PendingDemand.of(1, 2)));
    PoolEvent launched = first.await("launched", LONG);
    String worker = launched.workerId().orElseThrow();
    kubelet.bind(podOf(launched));
    kubelet.running(podOf(launched));
    List<WorkerHandle> journaled = first.onOwner(() -> List.copyOf(first.launched));
    first.onOwner(() -> first.autoscaler.shutdown(false)).get(30, TimeUnit.SECONDS);
    first.owner.shutdownNow();
    // A Pod with this cluster's labels that no configured pool owns (a pool since removed).
    Pod stray = WorkerPods.pod(context, pool("old", ns, Duration.ofMinutes(5)), "old-w1", ns);
    cluster.admin.pods().inNamespace(ns).resource(stray).create();

    try (AutoscalerHarness second = harness(pools, journaled)) {
      assertEquals(List.of(worker), second.events("adopted").stream()
          .map(e -> e.workerId().orElseThrow()).toList());
      PoolEvent orphan = second.await("orphan", LONG);
      assertEquals(Optional.of("old-w1"), orphan.workerId());
      SlurmProviderIT.waitFor(() -> kubelet.pod(stray.getMetadata().getName()) == null, LONG,
          "the stray Pod to be deleted");
      second.tick(List.of(RegisteredWorker.busy(worker, 1, second.clock.instant())), List.of());
      assertTrue(second.events("registered").get(0).message().startsWith("reattached"),
          second.events("registered").toString());
      assertEquals(List.of(), second.events("launch"), "the adopted Pod serves: no new one");
      assertFalse(kubelet.pod(podOf(launched)) == null, "the adopted Pod stays");
    }
  }

  @Test
  void aRoleWithoutCreateOnPodsIsNamedInTheError() throws Exception {
    String limited = cluster.namespace(List.of(
        KubeTestCluster.rule("", "pods", "get", "list", "watch", "delete"),
        KubeTestCluster.rule("", "secrets", "create", "delete")));
    try (KubernetesProvider provider = new KubernetesProvider(context, Set.of(limited),
        cluster.client(KubeTestCluster.RUNTIME_TOKEN, limited), true)) {
      ExecutionException e = assertThrows(ExecutionException.class, () -> provider.launch(
          pool("gpu", limited, Duration.ofMinutes(5)), "gpu-w1").get(60, TimeUnit.SECONDS));
      assertInstanceOf(ProviderException.class, e.getCause());
      assertTrue(e.getCause().getMessage().startsWith("cannot create the Pod of worker gpu-w1: the"
          + " runtime's Kubernetes account lacks the permission 'create' on 'pods' in namespace "
          + limited + "; grant it in the runtime's Role"), e.getCause().getMessage());
    }
  }

  @Test
  void theStartUpCheckNamesEveryMissingPermissionAndPassesWithTheDocsRole() {
    KubernetesAccess.check(cluster.client(KubeTestCluster.RUNTIME_TOKEN, ns), ns, "pools[0] (gpu)");
    String limited = cluster.namespace(List.of(
        KubeTestCluster.rule("", "pods", "get", "list", "watch", "delete"),
        KubeTestCluster.rule("", "secrets", "create", "delete")));
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () ->
        KubernetesAccess.check(cluster.client(KubeTestCluster.RUNTIME_TOKEN, limited), limited,
            "pools[0] (gpu)"));
    assertEquals("pools[0] (gpu).kubernetes.namespace: the runtime's Kubernetes account lacks"
        + " [create pods, get pods/log, list events] in namespace " + limited + "; apply the Role of"
        + " docs/pools.md (\"Kubernetes\") there and bind it to the account", e.getMessage());
  }

  static PoolStatus status(AutoscalerHarness h) {
    try {
      return h.onOwner(() -> h.autoscaler.status().get(0));
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }
}
