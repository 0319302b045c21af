package dev.bulletin.runtime.pool.impl;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Comparator;
import java.util.Map;

/**
 * The test Kubernetes of the provider's tests as a process, for examples/scaling_benchmark.py
 * (--provider kubernetes): a real kube-apiserver and etcd ({@link KubeTestCluster}), a fresh
 * namespace with the runtime's Role, and the SIMULATED node ({@link FakeKubelet}) set to bind
 * and start every new Pod there at once, running its command here (a real {@code bulletin
 * worker}, environment from its Secret) with this process's environment: the caller sets
 * PYTHONPATH and BULLETIN_JAR for the workers.
 *
 * <p>Protocol, on stdout: one line {@code KUBESIM ready <kubeconfig> <namespace>} once the API
 * server answers (the kubeconfig holds the runtime's token, the CA and the namespace: a runtime
 * started with {@code KUBECONFIG} pointing at it has exactly the docs' Role), or {@code KUBESIM
 * unavailable <why>} and exit 3 when etcd or the API server binary is missing. On stdin: a line
 * {@code scale} runs {@link KubernetesScaleIT}'s measure (1,000 Pods in the autoscaler's cache,
 * in its own namespace of the same API server) and answers {@code KUBESIM scale-done} (or
 * {@code KUBESIM scale-failed <why>}); end of input (or SIGTERM) stops everything it started.
 *
 * <p>java -cp runtime/target/test-classes:... dev.bulletin.runtime.pool.impl.KubeSimulation
 * [LOG_DIR] (the Pods' output goes to LOG_DIR/POD.log; default a temporary folder).
 */
public final class KubeSimulation {
  private KubeSimulation() {}

  public static void main(String[] args) throws Exception {
    Path apiserver = SlurmTestCluster.repoRoot().resolve(".stamps/kube/kube-apiserver");
    Path etcd = Path.of("/usr/bin/etcd");
    if (!Files.isExecutable(apiserver) || !Files.isExecutable(etcd)) {
      System.out.println("KUBESIM unavailable " + (Files.isExecutable(etcd) ? "" : etcd
          + " is missing; ") + (Files.isExecutable(apiserver) ? "" : apiserver + " is missing; ")
          + "run `make kube` (.ci/kube.sh installs etcd-server and builds the API server)");
      System.exit(3);
    }
    Path dir = Files.createTempDirectory("bulletin-kubesim");
    Path logs = args.length > 0 ? Files.createDirectories(Path.of(args[0])) : dir;
    KubeTestCluster cluster = KubeTestCluster.get();
    String ns = cluster.namespace(KubeTestCluster.ROLE);
    FakeKubelet kubelet = new FakeKubelet(cluster, ns, logs);
    // Registered after KubeTestCluster's: hooks run concurrently, so the Pods' processes are
    // asked to stop while the API server stops; nothing waits on the other.
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      kubelet.close();
      deleteQuietly(dir);
    }));
    kubelet.startEachPod(Map.of());
    Path kubeconfig = dir.resolve("kubeconfig");
    Files.createFile(kubeconfig, PosixFilePermissions.asFileAttribute(
        PosixFilePermissions.fromString("rw-------")));
    Files.writeString(kubeconfig, String.join("\n",
        "apiVersion: v1",
        "kind: Config",
        "clusters:",
        "- name: sim",
        "  cluster: {server: '" + cluster.url + "', certificate-authority: '" + cluster.ca + "'}",
        "users:",
        "- name: " + KubeTestCluster.RUNTIME_USER,
        "  user: {token: '" + KubeTestCluster.RUNTIME_TOKEN + "'}",
        "contexts:",
        "- name: sim",
        "  context: {cluster: sim, user: " + KubeTestCluster.RUNTIME_USER + ", namespace: " + ns + "}",
        "current-context: sim", ""));
    System.out.println("KUBESIM ready " + kubeconfig + " " + ns);
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    for (String line; (line = in.readLine()) != null; ) {
      if (line.strip().equals("scale")) {
        KubernetesScaleIT scale = new KubernetesScaleIT();
        scale.dir = Files.createDirectories(dir.resolve("scale"));
        try {
          scale.aPassWithAThousandPodsInTheCacheTakesMilliseconds();
          System.out.println("KUBESIM scale-done");
        } catch (Exception | AssertionError e) {
          System.out.println("KUBESIM scale-failed " + e);
        }
      }
    }
    System.exit(0); // Stdin closed: the caller is done (or gone); the hooks stop the rest.
  }

  private static void deleteQuietly(Path dir) {
    try (var files = Files.walk(dir)) {
      files.sorted(Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
    } catch (Exception ignored) {
      // A temporary folder left behind.
    }
  }
}
