package dev.bulletin.runtime.pool.impl;

import io.fabric8.kubernetes.client.KubernetesClient;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * The last lines of a worker Pod's log ({@code get pods/log}, which the API server proxies to
 * the node's kubelet), for the reason of a Pod that failed: often the worker's own last words
 * (a missing module, a bad head address) before it could register.
 */
final class PodLogs {
  private PodLogs() {}

  /** At most this many lines of the log's end ... */
  static final int LINES = 20;
  /** ... of at most this many characters in all (the end kept). */
  static final int CHARS = 2000;
  /** What the kubelet may send at most (it counts from the first of the tail's lines). */
  static final int BYTES = 64 * 1024;
  /** The longest the read may take: a node that does not answer must not hold a reason up. */
  static final Duration WAIT = Duration.ofSeconds(5);

  /**
   * "its last output: ..." of the Pod's worker container, "it wrote no output", or "its log
   * could not be read: ..." (a missing permission named, a node that does not answer): never an
   * exception, and never longer than {@link #WAIT}. Blocks: call it off the informer's thread.
   */
  static String lastOutput(KubernetesClient client, String ns, String name, Executor threads) {
    CompletableFuture<String> read = CompletableFuture.supplyAsync(() -> client.pods()
        .inNamespace(ns).withName(name).inContainer(WorkerPods.CONTAINER).limitBytes(BYTES)
        .tailingLines(LINES).getLog(), threads);
    try {
      String tail = tail(read.get(WAIT.toMillis(), TimeUnit.MILLISECONDS));
      return tail.isEmpty() ? "it wrote no output" : "its last output: " + tail;
    } catch (TimeoutException e) {
      read.cancel(true);
      return "its log could not be read: no answer within " + WAIT.toSeconds() + "s";
    } catch (ExecutionException e) {
      return "its log could not be read: " + KubeErrors.briefly(ns, e.getCause());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return "its log could not be read: interrupted";
    } catch (RuntimeException e) { // rejected by a closing executor
      return "its log could not be read: " + e;
    }
  }

  /** The log's last {@link #LINES} non-blank lines, joined by " | ", cut to {@link #CHARS}. */
  static String tail(String log) {
    if (log == null) {
      return "";
    }
    List<String> lines = new ArrayList<>();
    for (String line : log.split("\r?\n")) {
      if (!line.isBlank()) {
        lines.add(line.stripTrailing());
      }
    }
    String out = String.join(" | ", lines.subList(Math.max(0, lines.size() - LINES), lines.size()));
    return out.length() <= CHARS ? out : "..." + out.substring(out.length() - CHARS + 3);
  }
}
