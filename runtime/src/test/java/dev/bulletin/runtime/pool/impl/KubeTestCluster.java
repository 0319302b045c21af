package dev.bulletin.runtime.pool.impl;

import static org.junit.jupiter.api.Assertions.fail;

import io.fabric8.kubernetes.api.model.NamespaceBuilder;
import io.fabric8.kubernetes.api.model.rbac.PolicyRule;
import io.fabric8.kubernetes.api.model.rbac.PolicyRuleBuilder;
import io.fabric8.kubernetes.api.model.rbac.RoleBindingBuilder;
import io.fabric8.kubernetes.api.model.rbac.RoleBuilder;
import io.fabric8.kubernetes.client.Config;
import io.fabric8.kubernetes.client.ConfigBuilder;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientBuilder;
import java.io.IOException;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;

/**
 * A real kube-apiserver and etcd on loopback, one per test JVM, for the Kubernetes provider's
 * tests: TLS with a test CA, token authentication, RBAC, no anonymous access. What it lacks is
 * every controller and node: no scheduler, no kubelet, no garbage collector, no namespace
 * controller. Tests play the kubelet themselves ({@link FakeKubelet}) and use a fresh namespace
 * each (a deleted one would stay Terminating). Binaries: /usr/bin/etcd (Debian's etcd-server)
 * and .stamps/kube/kube-apiserver, both from .ci/kube.sh (make kube; make test runs it).
 */
final class KubeTestCluster {
  /** system:masters: the test's own view, and its kubelet's. */
  static final String ADMIN_TOKEN = "admin-" + UUID.randomUUID();
  /** The runtime's account: only what the Role in docs/pools.md grants, per namespace. */
  static final String RUNTIME_TOKEN = "runtime-" + UUID.randomUUID();
  static final String RUNTIME_USER = "bulletin-runtime";

  /** The Role of docs/pools.md, rule by rule. */
  static final List<PolicyRule> ROLE = List.of(
      rule("", "pods", "get", "list", "watch", "create", "delete"),
      rule("", "pods/log", "get"),
      rule("", "events", "get", "list", "watch"),
      rule("", "secrets", "create", "delete"));

  /** The longest a test waits for a background build of the API server (cold: 20-30 min). */
  static final Duration BUILD_WAIT = Duration.ofMinutes(45);
  private static KubeTestCluster instance;
  private static String unavailable;
  /** Why starting failed: later tests fail with it at once instead of starting again. */
  private static Throwable failed;

  String url;
  Path ca;
  /** The simulated node's kubelet key and certificate (the test CA's, IP 127.0.0.1), PKCS12. */
  Path kubeletKeys;
  static final String KUBELET_PASSWORD = "kubelet";
  private final List<Process> processes = new ArrayList<>();
  KubernetesClient admin;
  Duration startedIn;

  static PolicyRule rule(String group, String resource, String... verbs) {
    return new PolicyRuleBuilder().withApiGroups(group).withResources(resource).withVerbs(verbs).build();
  }

  static synchronized KubeTestCluster get() {
    if (instance != null) {
      return instance;
    }
    Assumptions.assumeTrue(unavailable == null, () -> "no Kubernetes API server: " + unavailable);
    if (failed != null) {
      fail("etcd and kube-apiserver failed to start for an earlier test: " + failed, failed);
    }
    Path apiserver = SlurmTestCluster.repoRoot().resolve(".stamps/kube/kube-apiserver");
    Path etcd = Path.of("/usr/bin/etcd");
    awaitBuild(apiserver);
    if (!Files.isExecutable(apiserver) || !Files.isExecutable(etcd)) {
      unavailable = (Files.isExecutable(etcd) ? "" : etcd + " is missing; ")
          + (Files.isExecutable(apiserver) ? "" : apiserver + " is missing; ")
          + "run `make kube` (.ci/kube.sh installs etcd-server and builds the API server)";
      Assumptions.abort("no Kubernetes API server: " + unavailable);
    }
    try {
      instance = new KubeTestCluster(Files.createTempDirectory("bulletin-kube"), etcd, apiserver);
    } catch (Exception | Error e) {
      failed = e;
      fail("cannot start etcd and kube-apiserver: " + e, e);
    }
    return instance;
  }

  private final Path dir;

  /**
   * make test builds the API server in the background (.ci/kube.sh --background), overlapping
   * the Java suite: wait for a build under way, and fail, with its log, if it failed.
   */
  private static void awaitBuild(Path apiserver) {
    Path building = apiserver.resolveSibling("building");
    Path log = apiserver.resolveSibling("build.log");
    long deadline = System.nanoTime() + BUILD_WAIT.toNanos();
    boolean said = false;
    while (Files.exists(building)) {
      long pid;
      try {
        pid = Long.parseLong(Files.readString(building).strip());
      } catch (IOException | NumberFormatException e) {
        return; // Just written or just removed: the next look decides.
      }
      if (ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false)) {
        if (!said) {
          System.out.println("waiting for the kube-apiserver build (pid " + pid + ", " + log + ")");
          said = true;
        }
        if (System.nanoTime() > deadline) {
          fail("the kube-apiserver build (pid " + pid + ") did not end within "
              + BUILD_WAIT.toMinutes() + " minutes; its log: " + log);
        }
        try {
          Thread.sleep(2000);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          return;
        }
      } else {
        break;
      }
    }
    if (said && !Files.isExecutable(apiserver)) {
      String tail;
      try {
        List<String> lines = Files.readAllLines(log);
        tail = String.join("\n", lines.subList(Math.max(0, lines.size() - 20), lines.size()));
      } catch (IOException e) {
        tail = "(no log: " + e.getMessage() + ")";
      }
      failed = new AssertionError("the kube-apiserver build failed; " + log + " ends:\n" + tail);
      fail(failed.getMessage());
    }
  }

  private KubeTestCluster(Path dir, Path etcdBin, Path apiBin) throws Exception {
    this.dir = dir;
    // Stops what it started if it fails half way, and at the JVM's exit otherwise.
    Runtime.getRuntime().addShutdownHook(new Thread(this::stop));
    try {
      boot(dir, etcdBin, apiBin);
    } catch (Exception | Error e) {
      stop();
      throw e;
    }
  }

  private void boot(Path dir, Path etcdBin, Path apiBin) throws Exception {
    long start = System.nanoTime();
    certificates(dir);
    Files.writeString(dir.resolve("tokens.csv"), ADMIN_TOKEN + ",admin,admin-uid,\"system:masters\"\n"
        + RUNTIME_TOKEN + "," + RUNTIME_USER + ",runtime-uid\n");
    int etcdPort = freePort();
    int peerPort = freePort();
    int apiPort = freePort();
    String etcdUrl = "http://127.0.0.1:" + etcdPort;
    start(dir, "etcd", List.of(etcdBin.toString(), "--name", "t", "--data-dir",
        dir.resolve("etcd").toString(), "--listen-client-urls", etcdUrl, "--advertise-client-urls",
        etcdUrl, "--listen-peer-urls", "http://127.0.0.1:" + peerPort,
        "--initial-advertise-peer-urls", "http://127.0.0.1:" + peerPort, "--initial-cluster",
        "t=http://127.0.0.1:" + peerPort));
    start(dir, "kube-apiserver", List.of(apiBin.toString(),
        "--etcd-servers=" + etcdUrl,
        "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
        "--secure-port=" + apiPort,
        "--tls-cert-file=" + dir.resolve("server.crt"),
        "--tls-private-key-file=" + dir.resolve("server.key"),
        "--client-ca-file=" + dir.resolve("ca.crt"),
        "--token-auth-file=" + dir.resolve("tokens.csv"),
        "--authorization-mode=RBAC",
        "--anonymous-auth=false",
        "--service-account-key-file=" + dir.resolve("sa.pub"),
        "--service-account-signing-key-file=" + dir.resolve("sa.key"),
        "--service-account-issuer=https://kubernetes.default.svc",
        "--service-cluster-ip-range=10.96.0.0/24",
        "--endpoint-reconciler-type=none",
        // pods/log is proxied to the node's kubelet (FakeKubeletNode): its certificate is
        // checked against the test CA, and the API server shows one of that CA in turn.
        "--kubelet-certificate-authority=" + dir.resolve("ca.crt"),
        "--kubelet-client-certificate=" + dir.resolve("kubelet-client.crt"),
        "--kubelet-client-key=" + dir.resolve("kubelet-client.key"),
        "--kubelet-preferred-address-types=InternalIP",
        // No controller manager makes the namespaces' default service accounts.
        "--disable-admission-plugins=ServiceAccount"));
    url = "https://127.0.0.1:" + apiPort;
    ca = dir.resolve("ca.crt");
    kubeletKeys = dir.resolve("kubelet.p12");
    admin = client(ADMIN_TOKEN, "default");
    long deadline = System.nanoTime() + Duration.ofSeconds(90).toNanos();
    while (true) {
      try {
        if ("ok".equals(admin.raw("/readyz"))) {
          break;
        }
      } catch (RuntimeException notYet) {
        // Still starting.
      }
      for (Process p : processes) {
        if (!p.isAlive()) {
          fail(p.info().command().orElse("?") + " exited: " + Files.readString(dir.resolve(
              p == processes.get(0) ? "etcd.log" : "kube-apiserver.log")));
        }
      }
      if (System.nanoTime() > deadline) {
        fail("kube-apiserver not ready within 90 s; its log: " + dir.resolve("kube-apiserver.log"));
      }
      Thread.sleep(200);
    }
    startedIn = Duration.ofNanos(System.nanoTime() - start);
    System.out.printf("kube-apiserver and etcd ready in %.1f s (%s)%n", startedIn.toMillis() / 1e3, dir);
  }

  private static void certificates(Path dir) {
    String script = "set -e\ncd " + Commands.shellQuote(dir.toString()) + "\n"
        + "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj /CN=test-ca 2>/dev/null\n"
        + "openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=kube-apiserver 2>/dev/null\n"
        + "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > san.ext\n"
        + "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 2 -extfile san.ext 2>/dev/null\n"
        // The simulated node's kubelet serving certificate, and the API server's client one.
        + "openssl req -newkey rsa:2048 -nodes -keyout kubelet.key -out kubelet.csr -subj /CN=" + FakeKubelet.NODE + " 2>/dev/null\n"
        + "printf 'subjectAltName=IP:127.0.0.1\\nextendedKeyUsage=serverAuth\\n' > kubelet.ext\n"
        + "openssl x509 -req -in kubelet.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out kubelet.crt -days 2 -extfile kubelet.ext 2>/dev/null\n"
        + "openssl pkcs12 -export -in kubelet.crt -inkey kubelet.key -out kubelet.p12 -passout pass:" + KUBELET_PASSWORD + "\n"
        + "openssl req -newkey rsa:2048 -nodes -keyout kubelet-client.key -out kubelet-client.csr -subj /CN=kube-apiserver-kubelet-client 2>/dev/null\n"
        + "printf 'extendedKeyUsage=clientAuth\\n' > client.ext\n"
        + "openssl x509 -req -in kubelet-client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out kubelet-client.crt -days 2 -extfile client.ext 2>/dev/null\n"
        + "openssl genrsa -out sa.key 2048 2>/dev/null\n"
        + "openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null\n";
    Commands.Result r = Commands.run(List.of("bash", "-c", script), Map.of(), Duration.ofSeconds(60));
    if (!r.ok()) {
      fail("openssl could not make the test certificates: " + r.said());
    }
  }

  private void start(Path dir, String name, List<String> argv) throws IOException {
    processes.add(new ProcessBuilder(argv).redirectErrorStream(true)
        .redirectOutput(dir.resolve(name + ".log").toFile()).start());
  }

  private static int freePort() throws IOException {
    try (ServerSocket socket = new ServerSocket(0)) {
      return socket.getLocalPort();
    }
  }

  KubernetesClient client(String token, String namespace) {
    Config config = new ConfigBuilder(Config.empty()).withMasterUrl(url).withCaCertFile(ca.toString())
        .withOauthToken(token).withNamespace(namespace).withRequestRetryBackoffLimit(0).build();
    return new KubernetesClientBuilder().withConfig(config).build();
  }

  /** A fresh namespace where the runtime's account has {@code rules} (the docs' Role: {@link #ROLE}). */
  String namespace(List<PolicyRule> rules) {
    String ns = "t-" + UUID.randomUUID().toString().substring(0, 8);
    admin.namespaces().resource(new NamespaceBuilder().withNewMetadata().withName(ns).endMetadata()
        .build()).create();
    admin.rbac().roles().inNamespace(ns).resource(new RoleBuilder().withNewMetadata()
        .withName("bulletin-runtime").endMetadata().withRules(rules).build()).create();
    admin.rbac().roleBindings().inNamespace(ns).resource(new RoleBindingBuilder().withNewMetadata()
        .withName("bulletin-runtime").endMetadata().withNewRoleRef().withApiGroup(
            "rbac.authorization.k8s.io").withKind("Role").withName("bulletin-runtime").endRoleRef()
        .addNewSubject().withApiGroup("rbac.authorization.k8s.io").withKind("User")
        .withName(RUNTIME_USER).endSubject().build()).create();
    return ns;
  }

  /**
   * The API server first (it hangs in its graceful shutdown without etcd), SIGTERM then SIGKILL
   * after a few seconds, then etcd: nothing outlives the test JVM.
   */
  private void stop() {
    for (int i = processes.size() - 1; i >= 0; i--) {
      Process p = processes.get(i);
      p.destroy();
      try {
        if (!p.waitFor(5, TimeUnit.SECONDS)) {
          p.destroyForcibly().waitFor(5, TimeUnit.SECONDS);
        }
      } catch (InterruptedException e) {
        p.destroyForcibly();
        Thread.currentThread().interrupt();
      }
    }
    // etcd's data and the logs (kept while the JVM runs, for a failing test to point at).
    try (var files = Files.walk(dir)) {
      files.sorted(java.util.Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
    } catch (IOException | RuntimeException ignored) {
      // A temp folder left behind is no test failure.
    }
  }
}
