package dev.bulletin.runtime.pool;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.regex.Pattern;

/**
 * How a Kubernetes pool asks for its worker Pods (docs/pools.md, "Kubernetes").
 *
 * @param namespace where the Pods and their Secrets go; empty = the client's namespace
 *     (kubeconfig's context, or the runtime Pod's own namespace in a cluster)
 * @param image the worker image (bulletin's Python package and the executors' libraries); may be
 *     left out only when {@code podTemplate} names one
 * @param gpuResource the extended resource a GPU is ({@code nvidia.com/gpu}, {@code amd.com/gpu})
 * @param nodeSelector labels a node must have
 * @param tolerations taints the Pods tolerate (GPU nodes are commonly tainted)
 * @param requests the worker container's requests; cpu and memory default to worker.cpus and
 *     worker.memory
 * @param limits the worker container's limits; memory defaults to the request, cpu to none (a
 *     CPU limit throttles the executor); the GPU is always both requested and limited
 * @param serviceAccount the Pods' service account; empty = the namespace's default
 * @param podTemplate a Pod (JSON) the provider starts from: the escape hatch for what has no field
 *     here (volumes, init containers, priority class); its container named "worker", or its
 *     first, runs the worker
 * @param head HOST:PORT the Pods dial (a Service in front of the runtime); empty = the runtime's
 *     advertised address
 * @param pendingTimeout a Pod not scheduled after this long is deleted and counts as a failed
 *     launch, with the scheduler's reason
 * @param terminateGrace the Pods' termination grace period
 * @param simulateGpus workers advertise {@code worker.gpus} simulated GPUs (nodes without GPUs)
 */
public record KubernetesOptions(Optional<String> namespace, Optional<String> image,
    String gpuResource, Map<String, String> nodeSelector, List<Toleration> tolerations,
    Map<String, String> requests, Map<String, String> limits, Optional<String> serviceAccount,
    Optional<String> podTemplate, Optional<String> head, Duration pendingTimeout,
    Duration terminateGrace, boolean simulateGpus) {

  public static final Duration DEFAULT_PENDING_TIMEOUT = Duration.ofMinutes(5);
  public static final Duration DEFAULT_TERMINATE_GRACE = Duration.ofSeconds(30);
  /** A DNS-1123 label: what Kubernetes accepts as a namespace name. */
  private static final Pattern DNS_LABEL = Pattern.compile("[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?");
  private static final List<String> RESOURCES = List.of("cpu", "memory", "ephemeral-storage");

  /**
   * One toleration, as in a Pod spec.
   *
   * @param seconds tolerationSeconds (NoExecute only); empty = forever
   */
  public record Toleration(Optional<String> key, String operator, Optional<String> value,
      Optional<String> effect, Optional<Long> seconds) {
    public Toleration {
      if (!operator.equals("Exists") && !operator.equals("Equal")) {
        throw new IllegalArgumentException("kubernetes.tolerations: operator must be Exists or"
            + " Equal, got '" + operator + "'");
      }
    }
  }

  public KubernetesOptions {
    namespace = namespace.filter(s -> !s.isBlank());
    image = image.filter(s -> !s.isBlank());
    serviceAccount = serviceAccount.filter(s -> !s.isBlank());
    head = head.filter(s -> !s.isBlank());
    nodeSelector = Map.copyOf(nodeSelector);
    tolerations = List.copyOf(tolerations);
    requests = Map.copyOf(requests);
    limits = Map.copyOf(limits);
    if (namespace.isPresent() && !DNS_LABEL.matcher(namespace.get()).matches()) {
      throw new IllegalArgumentException("kubernetes.namespace: '" + namespace.get() + "' is not a"
          + " namespace name (lower-case letters, digits and '-', at most 63)");
    }
    if (gpuResource == null || !gpuResource.matches("[a-z0-9.-]+/[A-Za-z0-9._-]+")) {
      throw new IllegalArgumentException("kubernetes.gpu_resource: '" + gpuResource + "' is not an"
          + " extended resource name such as nvidia.com/gpu");
    }
    for (String name : requests.keySet()) {
      requireKnown("kubernetes.requests", name);
    }
    for (String name : limits.keySet()) {
      requireKnown("kubernetes.limits", name);
    }
    if (head.isPresent() && !head.get().matches(".+:\\d+")) {
      throw new IllegalArgumentException("kubernetes.head must be HOST:PORT, got " + head.get());
    }
    if (pendingTimeout == null || pendingTimeout.isNegative() || pendingTimeout.isZero()) {
      throw new IllegalArgumentException("kubernetes.pending_timeout must be > 0, got " + pendingTimeout);
    }
    if (terminateGrace == null || terminateGrace.isNegative()) {
      throw new IllegalArgumentException("kubernetes.terminate_grace must be >= 0, got " + terminateGrace);
    }
  }

  private static void requireKnown(String field, String name) {
    if (!RESOURCES.contains(name)) {
      throw new IllegalArgumentException(field + ": '" + name + "' is not one of " + RESOURCES
          + " (the GPU comes from worker.gpus and kubernetes.gpu_resource)");
    }
  }

  public static KubernetesOptions defaults() {
    return new KubernetesOptions(Optional.empty(), Optional.empty(), "nvidia.com/gpu", Map.of(),
        List.of(), Map.of(), Map.of(), Optional.empty(), Optional.empty(), Optional.empty(),
        DEFAULT_PENDING_TIMEOUT, DEFAULT_TERMINATE_GRACE, false);
  }

  /** The same options for an image (tests and code start from {@link #defaults}). */
  public KubernetesOptions withImage(String namespace, String image) {
    return new KubernetesOptions(Optional.of(namespace), Optional.of(image), gpuResource,
        nodeSelector, tolerations, requests, limits, serviceAccount, podTemplate, head,
        pendingTimeout, terminateGrace, simulateGpus);
  }
}
