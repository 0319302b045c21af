package dev.bulletin.runtime.pool.impl;

import io.fabric8.kubernetes.api.model.BindingBuilder;
import io.fabric8.kubernetes.api.model.ContainerStatusBuilder;
import io.fabric8.kubernetes.api.model.EnvVar;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodCondition;
import io.fabric8.kubernetes.api.model.PodConditionBuilder;
import io.fabric8.kubernetes.api.model.PodStatus;
import io.fabric8.kubernetes.api.model.Secret;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientException;
import io.fabric8.kubernetes.client.informers.ResourceEventHandler;
import io.fabric8.kubernetes.client.informers.SharedIndexInformer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.function.Consumer;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A SIMULATION of the node side of Kubernetes, as Kubernetes' own integration tests do it: the
 * test API server has no scheduler and no kubelet, so this class binds Pods to a node, writes
 * the Pod status a scheduler or kubelet would (Unschedulable, Running, Failed/Evicted), finishes
 * the deletion of bound Pods (the API server only marks them), and can run a Pod's command as a
 * local process with the environment resolved from its Secret and {@code $(VAR)} expanded, as
 * a kubelet does, so that a real {@code bulletin worker} joins a real head, its output in
 * {@code <logs>/<pod>.log}. Everything it does goes through the real API server with the admin's
 * token; the one call the API server makes to it, a Pod's log, {@link FakeKubeletNode} answers.
 */
final class FakeKubelet implements AutoCloseable {
  static final String NODE = "fake-node-1";
  private static final Pattern VAR = Pattern.compile("\\$\\(([A-Za-z_][A-Za-z0-9_]*)\\)");

  private final KubernetesClient admin;
  private final String namespace;
  private final SharedIndexInformer<Pod> informer;
  private final Map<String, Process> processes = new ConcurrentHashMap<>();
  private final Path logs;
  /** Set by {@link #startEachPod}: the extra environment of every new Pod's command. */
  private volatile Map<String, String> startEach;
  private final ExecutorService starter = Executors.newSingleThreadExecutor(r -> {
    Thread t = new Thread(r, "fake-kubelet-start");
    t.setDaemon(true);
    return t;
  });

  FakeKubelet(KubeTestCluster cluster, String namespace, Path logs) {
    this.admin = cluster.admin;
    this.namespace = namespace;
    this.logs = logs;
    FakeKubeletNode.open(cluster, namespace, logs);
    this.informer = admin.pods().inNamespace(namespace).inform(new ResourceEventHandler<>() {
      @Override
      public void onAdd(Pod pod) {
        finishDeletion(pod);
        Map<String, String> env = startEach;
        if (env != null && pod.getSpec().getNodeName() == null
            && pod.getMetadata().getDeletionTimestamp() == null) {
          String name = pod.getMetadata().getName();
          // Off the informer's thread: start() waits on the API server.
          starter.execute(() -> {
            try {
              start(name, env);
            } catch (Exception e) {
              System.err.println("fake kubelet: cannot start Pod " + name + ": " + e);
            }
          });
        }
      }

      @Override
      public void onUpdate(Pod before, Pod pod) {
        finishDeletion(pod);
      }

      @Override
      public void onDelete(Pod pod, boolean unknownFinalState) {
        stopProcess(pod.getMetadata().getName());
      }
    });
  }

  List<Pod> pods() {
    return admin.pods().inNamespace(namespace).list().getItems();
  }

  Pod pod(String name) {
    return admin.pods().inNamespace(namespace).withName(name).get();
  }

  /**
   * From now on, schedule and start every new Pod of the namespace at once, as a scheduler and
   * kubelet with room for it would ({@link #start}); for {@link KubeSimulation}.
   */
  void startEachPod(Map<String, String> extraEnv) {
    startEach = Map.copyOf(extraEnv);
  }

  /** What a scheduler does: bind the Pod to the node. */
  void bind(String name) {
    bind(name, NODE);
  }

  /** Binds the Pod to another node (one the test made, say, whose kubelet does not answer). */
  void bind(String name, String node) {
    admin.bindings().inNamespace(namespace).resource(new BindingBuilder().withNewMetadata()
        .withName(name).endMetadata().withNewTarget().withApiVersion("v1").withKind("Node")
        .withName(node).endTarget().build()).create();
  }

  /** What a scheduler writes when no node fits the Pod. */
  void unschedulable(String name, String message) {
    status(name, s -> s.setConditions(List.of(condition("PodScheduled", "False", "Unschedulable",
        message))));
  }

  /** What a kubelet writes once the container started. */
  void running(String name) {
    status(name, s -> {
      s.setPhase("Running");
      s.setStartTime(Instant.now().toString());
      s.setConditions(List.of(condition("PodScheduled", "True", null, null),
          condition("Ready", "True", null, null)));
    });
  }

  /** What a kubelet writes for a Pod it evicts (node pressure) or whose container failed. */
  void failed(String name, String reason, String message) {
    status(name, s -> {
      s.setPhase("Failed");
      s.setReason(reason);
      s.setMessage(message);
    });
  }

  private static PodCondition condition(String type, String status, String reason, String message) {
    return new PodConditionBuilder().withType(type).withStatus(status).withReason(reason)
        .withMessage(message).withLastTransitionTime(Instant.now().toString()).build();
  }

  private void status(String name, Consumer<PodStatus> change) {
    for (int attempt = 0; ; attempt++) {
      Pod pod = pod(name);
      if (pod.getStatus() == null) {
        pod.setStatus(new PodStatus());
      }
      change.accept(pod.getStatus());
      try {
        admin.pods().inNamespace(namespace).resource(pod).updateStatus();
        return;
      } catch (KubernetesClientException e) {
        if (e.getCode() != 409 || attempt > 10) {
          throw e;
        }
      }
    }
  }

  /**
   * Binds the Pod, runs its worker container's command here as a kubelet would (environment
   * from the Secret, $(VAR) expanded), and reports Running, then Succeeded or Failed at exit.
   */
  void start(String name, Map<String, String> extraEnv) throws Exception {
    start(name, extraEnv, List.of());
  }

  /**
   * As {@link #start(String, Map)}, running {@code instead} (when not empty) in place of the
   * container's command: what an image without the worker would do, say.
   */
  void start(String name, Map<String, String> extraEnv, List<String> instead) throws Exception {
    bind(name);
    Pod pod = pod(name);
    var container = pod.getSpec().getContainers().get(0);
    Map<String, String> env = new HashMap<>();
    for (EnvVar var : container.getEnv()) {
      if (var.getValueFrom() != null && var.getValueFrom().getSecretKeyRef() != null) {
        var ref = var.getValueFrom().getSecretKeyRef();
        Secret secret = admin.secrets().inNamespace(namespace).withName(ref.getName()).get();
        String value = secret == null || secret.getData() == null ? null : secret.getData().get(ref.getKey());
        if (value != null) {
          env.put(var.getName(), new String(Base64.getDecoder().decode(value), StandardCharsets.UTF_8));
        } else if (!Boolean.TRUE.equals(ref.getOptional())) {
          throw new IllegalStateException("Secret " + ref.getName() + " has no key " + ref.getKey());
        }
      } else if (var.getValue() != null) {
        env.put(var.getName(), var.getValue());
      }
    }
    List<String> argv = new ArrayList<>();
    container.getCommand().forEach(word -> argv.add(expand(word, env)));
    container.getArgs().forEach(word -> argv.add(expand(word, env)));
    if (!instead.isEmpty()) {
      argv.clear();
      argv.addAll(instead);
    }
    ProcessBuilder builder = new ProcessBuilder(argv).redirectErrorStream(true)
        .redirectOutput(logs.resolve(name + ".log").toFile());
    Commands.SECRET_VARIABLES.forEach(builder.environment()::remove);
    builder.environment().remove("BULLETIN_WORKER_TOKEN");
    builder.environment().putAll(extraEnv);
    builder.environment().putAll(env);
    Process process = builder.start();
    processes.put(name, process);
    running(name);
    process.onExit().thenRun(() -> {
      try {
        if (processes.remove(name) != null && pod(name) != null) {
          int code = process.exitValue();
          status(name, s -> {
            s.setPhase(code == 0 ? "Succeeded" : "Failed");
            s.setContainerStatuses(List.of(new ContainerStatusBuilder().withName(container.getName())
                .withImage(container.getImage()).withImageID("").withReady(false)
                .withRestartCount(0).withNewState().withNewTerminated().withExitCode(code)
                .withReason(code == 0 ? "Completed" : "Error")
                .withFinishedAt(Instant.now().toString()).endTerminated().endState().build()));
          });
        }
      } catch (RuntimeException podGone) {
        // Deleted meanwhile.
      }
    });
  }

  /** Kubernetes expands $(VAR) in command and args from the container's environment. */
  static String expand(String word, Map<String, String> env) {
    Matcher m = VAR.matcher(word);
    StringBuilder out = new StringBuilder();
    while (m.find()) {
      m.appendReplacement(out, Matcher.quoteReplacement(env.getOrDefault(m.group(1), m.group())));
    }
    return m.appendTail(out).toString();
  }

  /** A bound Pod being deleted: the kubelet stops its container, then removes the Pod. */
  private void finishDeletion(Pod pod) {
    if (pod.getMetadata().getDeletionTimestamp() == null || pod.getSpec().getNodeName() == null) {
      return;
    }
    stopProcess(pod.getMetadata().getName());
    try {
      admin.pods().inNamespace(namespace).withName(pod.getMetadata().getName()).withGracePeriod(0)
          .delete();
    } catch (KubernetesClientException gone) {
      // Another event finished it.
    }
  }

  private void stopProcess(String name) {
    Process process = processes.remove(name);
    if (process != null) {
      process.destroy();
    }
  }

  @Override
  public void close() {
    informer.stop();
    FakeKubeletNode.close(namespace);
    starter.shutdownNow();
    processes.values().forEach(Process::destroyForcibly);
  }
}
