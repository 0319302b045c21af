package dev.bulletin.runtime.pool.impl;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpsConfigurator;
import com.sun.net.httpserver.HttpsParameters;
import com.sun.net.httpserver.HttpsServer;
import io.fabric8.kubernetes.api.model.Node;
import io.fabric8.kubernetes.api.model.NodeBuilder;
import io.fabric8.kubernetes.api.model.NodeStatus;
import io.fabric8.kubernetes.api.model.NodeStatusBuilder;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.security.cert.CertificateFactory;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.TrustManagerFactory;

/**
 * A SIMULATION of the one kubelet endpoint the runtime reaches, for {@link FakeKubelet}: the
 * Node object of {@link FakeKubelet#NODE} (address 127.0.0.1 as InternalIP, its kubelet port
 * in status.daemonEndpoints, which is where the API server looks) and, on that port, HTTPS
 * {@code GET /containerLogs/<ns>/<pod>/<container>?tailLines=N&limitBytes=M}, the path the API
 * server proxies {@code pods/log} to (pkg/registry/core/pod/strategy.go, LogLocation), answered
 * from the log file FakeKubelet writes for the Pod's process. As a kubelet's, the certificate is
 * the test CA's for IP 127.0.0.1 (the API server checks it: --kubelet-certificate-authority), and
 * the caller must present a client certificate of that CA (the API server's
 * --kubelet-client-certificate). One per test JVM, shared by the FakeKubelets of the namespaces
 * open at once; it stops when the last closes.
 */
final class FakeKubeletNode {
  private static FakeKubeletNode running;
  private static int users;

  private final HttpsServer server;
  private final ExecutorService handlers = Executors.newFixedThreadPool(2, r -> {
    Thread t = new Thread(r, "fake-kubelet-https");
    t.setDaemon(true);
    return t;
  });
  /** Where each namespace's Pods write their output, {@code <dir>/<pod>.log}. */
  private final Map<String, Path> logs = new ConcurrentHashMap<>();

  /** The node, started (and its Node object pointed at it) if it is not running. */
  static synchronized FakeKubeletNode open(KubeTestCluster cluster, String namespace, Path dir) {
    if (running == null) {
      try {
        running = new FakeKubeletNode(cluster);
      } catch (Exception e) {
        throw new IllegalStateException("the simulated node's kubelet endpoint cannot start: " + e, e);
      }
    }
    users++;
    running.logs.put(namespace, dir);
    return running;
  }

  static synchronized void close(String namespace) {
    if (running == null) {
      return;
    }
    running.logs.remove(namespace);
    if (--users <= 0) {
      running.server.stop(0);
      running.handlers.shutdownNow();
      running = null;
      users = 0;
    }
  }

  private FakeKubeletNode(KubeTestCluster cluster) throws Exception {
    char[] password = KubeTestCluster.KUBELET_PASSWORD.toCharArray();
    KeyStore keys = KeyStore.getInstance("PKCS12");
    try (InputStream in = Files.newInputStream(cluster.kubeletKeys)) {
      keys.load(in, password);
    }
    KeyManagerFactory kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
    kmf.init(keys, password);
    KeyStore trusted = KeyStore.getInstance("PKCS12");
    trusted.load(null, null);
    try (InputStream in = Files.newInputStream(cluster.ca)) {
      trusted.setCertificateEntry("ca", CertificateFactory.getInstance("X.509").generateCertificate(in));
    }
    TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
    tmf.init(trusted);
    SSLContext tls = SSLContext.getInstance("TLS");
    tls.init(kmf.getKeyManagers(), tmf.getTrustManagers(), null);
    server = HttpsServer.create(new InetSocketAddress("127.0.0.1", 0), 16);
    server.setHttpsConfigurator(new HttpsConfigurator(tls) {
      @Override
      public void configure(HttpsParameters params) {
        SSLParameters p = getSSLContext().getDefaultSSLParameters();
        p.setNeedClientAuth(true); // the API server's kubelet client certificate
        params.setSSLParameters(p);
      }
    });
    server.createContext("/containerLogs/", this::containerLogs);
    server.setExecutor(handlers);
    server.start();
    register(cluster.admin, server.getAddress().getPort());
  }

  /** The Node object, created or its status pointed at this port. */
  private static void register(KubernetesClient admin, int port) {
    NodeStatus status = new NodeStatusBuilder().addNewAddress().withType("InternalIP")
        .withAddress("127.0.0.1").endAddress().addNewAddress().withType("Hostname")
        .withAddress("127.0.0.1").endAddress().withNewDaemonEndpoints().withNewKubeletEndpoint()
        .withPort(port).endKubeletEndpoint().endDaemonEndpoints().build();
    Node node = new NodeBuilder().withNewMetadata().withName(FakeKubelet.NODE).endMetadata()
        .withStatus(status).build();
    try {
      admin.nodes().resource(node).create(); // a Node's create takes its status too
    } catch (KubernetesClientException e) {
      if (e.getCode() != 409) {
        throw e;
      }
      admin.nodes().withName(FakeKubelet.NODE).editStatus(n -> {
        n.setStatus(status);
        return n;
      });
    }
  }

  /** GET /containerLogs/ns/pod/container: the file's last tailLines lines, then limitBytes. */
  private void containerLogs(HttpExchange exchange) throws IOException {
    try (exchange) {
      String[] parts = exchange.getRequestURI().getPath().split("/");
      Path dir = parts.length == 5 ? logs.get(parts[2]) : null;
      Path file = dir == null ? null : dir.resolve(parts[3] + ".log");
      if (!"GET".equals(exchange.getRequestMethod()) || file == null || !Files.isRegularFile(file)) {
        answer(exchange, 404, ("no log of container " + String.join("/",
            Arrays.copyOfRange(parts, Math.min(2, parts.length), parts.length))).getBytes(
                StandardCharsets.UTF_8));
        return;
      }
      Map<String, String> query = query(exchange.getRequestURI().getRawQuery());
      byte[] log = Files.readAllBytes(file);
      int from = 0;
      if (query.containsKey("tailLines")) {
        int lines = Integer.parseInt(query.get("tailLines"));
        int end = log.length > 0 && log[log.length - 1] == '\n' ? log.length - 1 : log.length;
        from = end;
        for (int seen = 0; from > 0; from--) {
          if (log[from - 1] == '\n' && ++seen == lines) {
            break;
          }
        }
        if (lines == 0) {
          from = log.length;
        }
      }
      int to = log.length;
      if (query.containsKey("limitBytes")) {
        to = (int) Math.min(to, from + Long.parseLong(query.get("limitBytes")));
      }
      answer(exchange, 200, Arrays.copyOfRange(log, from, to));
    }
  }

  private static void answer(HttpExchange exchange, int code, byte[] body) throws IOException {
    exchange.getResponseHeaders().set("Content-Type", "text/plain; charset=utf-8");
    exchange.sendResponseHeaders(code, body.length == 0 ? -1 : body.length);
    if (body.length > 0) {
      try (OutputStream out = exchange.getResponseBody()) {
        out.write(body);
      }
    }
  }

  private static Map<String, String> query(String raw) {
    Map<String, String> out = new HashMap<>();
    if (raw != null) {
      for (String pair : raw.split("&")) {
        int eq = pair.indexOf('=');
        if (eq > 0) {
          out.put(URLDecoder.decode(pair.substring(0, eq), StandardCharsets.UTF_8),
              URLDecoder.decode(pair.substring(eq + 1), StandardCharsets.UTF_8));
        }
      }
    }
    return out;
  }
}
