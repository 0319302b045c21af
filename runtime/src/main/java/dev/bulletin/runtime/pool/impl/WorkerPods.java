package dev.bulletin.runtime.pool.impl;

import dev.bulletin.runtime.pool.KubernetesOptions;
import dev.bulletin.runtime.pool.PoolConfig;
import dev.bulletin.runtime.pool.ProviderContext;
import dev.bulletin.runtime.pool.ProviderException;
import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.ContainerBuilder;
import io.fabric8.kubernetes.api.model.EnvVar;
import io.fabric8.kubernetes.api.model.EnvVarBuilder;
import io.fabric8.kubernetes.api.model.OwnerReferenceBuilder;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodBuilder;
import io.fabric8.kubernetes.api.model.Quantity;
import io.fabric8.kubernetes.api.model.Secret;
import io.fabric8.kubernetes.api.model.SecretBuilder;
import io.fabric8.kubernetes.api.model.Toleration;
import io.fabric8.kubernetes.api.model.TolerationBuilder;
import io.fabric8.kubernetes.client.utils.Serialization;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The Pod and the Secret of one Kubernetes pool worker. The Secret holds everything a worker
 * needs to join (the head's address, the worker token, its single-use join token) and the Pod
 * refers to it with {@code secretKeyRef}: nothing secret is in the Pod spec, which anyone with
 * {@code get pods} reads. The head reaches the arguments through Kubernetes' own {@code $(VAR)}
 * expansion of the container's environment.
 */
final class WorkerPods {
  private WorkerPods() {}

  static final String CLUSTER = "bulletin.dev/cluster";
  static final String POOL = "bulletin.dev/pool";
  static final String WORKER = "bulletin.dev/worker";
  /** On the Pod: how long it may stay unscheduled (the pool's pending_timeout); survives restarts. */
  static final String PENDING_TIMEOUT = "bulletin.dev/pending-timeout-seconds";
  static final String CONTAINER = "worker";
  /** The Secret's keys, also the worker's environment variables. */
  static final String HEAD = "BULLETIN_HEAD";
  static final String WORKER_TOKEN = "BULLETIN_WORKER_TOKEN";
  static final String JOIN_TOKEN = "BULLETIN_JOIN_TOKEN";
  /** The cluster CA's text, on a TLS runtime: a Pod shares no file with the head. */
  static final String CA_PEM = "BULLETIN_CA_PEM";
  /** A worker that is not scheduled within its pending timeout plus this gets no join. */
  static final Duration JOIN_SLACK = Duration.ofMinutes(15);

  /** Pod (and Secret) name: DNS-1123, unique per cluster and worker. */
  static String name(String clusterId, String workerId) {
    return ("bulletin-" + clusterId + "-" + workerId).toLowerCase(Locale.ROOT).replace('_', '-');
  }

  static Map<String, String> labels(ProviderContext context, String pool, String workerId) {
    return Map.of(CLUSTER, context.clusterId(), POOL, pool, WORKER, workerId);
  }

  /** The worker's Secret; its owner reference to the Pod is set once the Pod exists. */
  static Secret secret(ProviderContext context, PoolConfig pool, String workerId, String namespace) {
    Map<String, String> data = new LinkedHashMap<>();
    data.put(HEAD, pool.kubernetes().head().orElse(context.headAddress()));
    data.put(WORKER_TOKEN, context.workerToken());
    context.caPem().ifPresent(pem -> data.put(CA_PEM, pem));
    // Good while the Pod may wait for a node and start: the pending timeout and some slack.
    context.joinTokens().export(workerId, pool.kubernetes().pendingTimeout().plus(JOIN_SLACK)
        .plus(pool.startTimeout()), data);
    return new SecretBuilder().withNewMetadata().withName(name(context.clusterId(), workerId))
        .withNamespace(namespace).withLabels(labels(context, pool.name(), workerId)).endMetadata()
        .withType("Opaque").withStringData(data).build();
  }

  /** The Secret, owned by its Pod so that Kubernetes' garbage collector removes it with the Pod. */
  static Secret ownedBy(Secret secret, Pod pod) {
    return new SecretBuilder(secret).editMetadata().withOwnerReferences(new OwnerReferenceBuilder()
        .withApiVersion("v1").withKind("Pod").withName(pod.getMetadata().getName())
        .withUid(pod.getMetadata().getUid()).build()).endMetadata().build();
  }

  static Pod pod(ProviderContext context, PoolConfig pool, String workerId, String namespace) {
    KubernetesOptions k = pool.kubernetes();
    Pod base = k.podTemplate().map(WorkerPods::template).orElseGet(Pod::new);
    PodBuilder builder = new PodBuilder(base);
    String name = name(context.clusterId(), workerId);
    Map<String, String> labels = new LinkedHashMap<>();
    if (base.getMetadata() != null && base.getMetadata().getLabels() != null) {
      labels.putAll(base.getMetadata().getLabels());
    }
    labels.putAll(labels(context, pool.name(), workerId));
    builder.editOrNewMetadata().withName(name).withNamespace(namespace).withGenerateName(null)
        .withLabels(labels).addToAnnotations(PENDING_TIMEOUT,
            Long.toString(k.pendingTimeout().toSeconds())).endMetadata();
    List<Container> containers = new ArrayList<>(base.getSpec() == null
        || base.getSpec().getContainers() == null ? List.of() : base.getSpec().getContainers());
    int at = 0;
    for (int i = 0; i < containers.size(); i++) {
      if (CONTAINER.equals(containers.get(i).getName())) {
        at = i;
      }
    }
    Container worker = worker(context, pool, workerId, name,
        containers.isEmpty() ? new Container() : containers.get(at));
    if (containers.isEmpty()) {
      containers.add(worker);
    } else {
      containers.set(at, worker);
    }
    var spec = builder.editOrNewSpec().withContainers(containers)
        // A worker that ends is replaced by the autoscaler, under a new id and join token.
        .withRestartPolicy("Never")
        .addToNodeSelector(k.nodeSelector())
        .addAllToTolerations(k.tolerations().stream().map(WorkerPods::toleration).toList())
        .withTerminationGracePeriodSeconds(k.terminateGrace().toSeconds());
    k.serviceAccount().ifPresent(spec::withServiceAccountName);
    pool.worker().walltimeLimit().ifPresent(w -> spec.withActiveDeadlineSeconds(w.toSeconds()));
    return spec.endSpec().build();
  }

  private static Container worker(ProviderContext context, PoolConfig pool, String workerId,
      String secret, Container base) {
    KubernetesOptions k = pool.kubernetes();
    List<String> argv = context.command().argv(pool, pool.python().orElse("python3"),
        "$(" + HEAD + ")", workerId, k.simulateGpus());
    ContainerBuilder c = new ContainerBuilder(base).withName(CONTAINER)
        .withCommand(argv.get(0)).withArgs(argv.subList(1, argv.size()));
    k.image().ifPresent(c::withImage);
    if (c.getImage() == null || c.getImage().isBlank()) {
      throw new ProviderException("pool " + pool.name() + ": kubernetes.pod_template has no image"
          + " for its worker container; set kubernetes.image");
    }
    List<EnvVar> env = new ArrayList<>(base.getEnv() == null ? List.of() : base.getEnv());
    // HEAD first: $(BULLETIN_HEAD) in the arguments expands only from variables defined.
    for (String key : List.of(HEAD, WORKER_TOKEN, JOIN_TOKEN, CA_PEM)) {
      boolean always = key.equals(HEAD) || key.equals(WORKER_TOKEN);
      env.removeIf(e -> e.getName().equals(key));
      env.add(new EnvVarBuilder().withName(key).withNewValueFrom().withNewSecretKeyRef()
          .withName(secret).withKey(key).withOptional(!always).endSecretKeyRef().endValueFrom()
          .build());
    }
    c.withEnv(env);
    Map<String, Quantity> requests = new LinkedHashMap<>();
    Map<String, Quantity> limits = new LinkedHashMap<>();
    if (base.getResources() != null) {
      if (base.getResources().getRequests() != null) {
        requests.putAll(base.getResources().getRequests());
      }
      if (base.getResources().getLimits() != null) {
        limits.putAll(base.getResources().getLimits());
      }
    }
    requests.put("cpu", new Quantity(Integer.toString(pool.worker().cpus())));
    pool.worker().memory().ifPresent(m -> {
      requests.put("memory", new Quantity(Long.toString(m)));
      limits.put("memory", new Quantity(Long.toString(m)));
    });
    k.requests().forEach((key, value) -> requests.put(key, new Quantity(value)));
    k.limits().forEach((key, value) -> limits.put(key, new Quantity(value)));
    if (pool.worker().gpus() > 0 && !k.simulateGpus()) {
      // Extended resources are not overcommitted: request and limit must be equal.
      Quantity gpus = new Quantity(Integer.toString(pool.worker().gpus()));
      requests.put(k.gpuResource(), gpus);
      limits.put(k.gpuResource(), gpus);
    }
    return c.withNewResources().withRequests(requests).withLimits(limits).endResources().build();
  }

  private static Toleration toleration(KubernetesOptions.Toleration t) {
    return new TolerationBuilder().withKey(t.key().orElse(null)).withOperator(t.operator())
        .withValue(t.value().orElse(null)).withEffect(t.effect().orElse(null))
        .withTolerationSeconds(t.seconds().orElse(null)).build();
  }

  private static Pod template(String json) {
    try {
      return Serialization.unmarshal(json, Pod.class);
    } catch (RuntimeException e) {
      throw new ProviderException("kubernetes.pod_template is not a Pod: " + e.getMessage(), e);
    }
  }
}
