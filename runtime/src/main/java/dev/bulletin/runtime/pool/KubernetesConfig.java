package dev.bulletin.runtime.pool;

import com.fasterxml.jackson.databind.JsonNode;
import dev.bulletin.runtime.config.ConfigNode;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/** Reads a pool's {@code kubernetes:} block (docs/pools.md) into {@link KubernetesOptions}. */
final class KubernetesConfig {
  private KubernetesConfig() {}

  static Optional<KubernetesOptions> read(ConfigNode k) {
    KubernetesOptions defaults = KubernetesOptions.defaults();
    Optional<String> namespace = k.string("namespace");
    Optional<String> image = k.string("image");
    String gpuResource = k.string("gpu_resource").orElse(defaults.gpuResource());
    var nodeSelector = k.stringMap("node_selector");
    List<KubernetesOptions.Toleration> tolerations = new ArrayList<>();
    for (ConfigNode t : k.list("tolerations", "tolerations (each a mapping such as"
        + " {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule})")) {
      Optional<String> key = t.string("key");
      String operator = t.string("operator").orElse("Equal");
      Optional<String> value = t.string("value");
      Optional<String> effect = t.string("effect");
      Optional<Long> seconds = t.has("toleration_seconds")
          ? Optional.of((long) t.integer("toleration_seconds", 0, 0)) : Optional.empty();
      t.rejectUnknown();
      t.build(() -> new KubernetesOptions.Toleration(key, operator, value, effect, seconds))
          .ifPresent(tolerations::add);
    }
    var requests = k.stringMap("requests");
    var limits = k.stringMap("limits");
    Optional<String> serviceAccount = k.string("service_account");
    Optional<String> template = k.raw("pod_template").flatMap(node -> template(k, node));
    Optional<String> head = k.string("head");
    Duration pending = k.duration("pending_timeout").orElse(defaults.pendingTimeout());
    Duration grace = k.duration("terminate_grace").orElse(defaults.terminateGrace());
    boolean simulateGpus = k.bool("simulate_gpus", false);
    k.rejectUnknown();
    return k.build(() -> new KubernetesOptions(namespace, image, gpuResource, nodeSelector,
        tolerations, requests, limits, serviceAccount, template, head, pending, grace,
        simulateGpus));
  }

  /** A Pod as YAML under the key; kept as JSON text for the provider's client to read. */
  private static Optional<String> template(ConfigNode k, JsonNode node) {
    if (!node.isObject() || !node.path("spec").isObject()) {
      k.error("pod_template", "expected a Pod (a mapping with metadata and spec), got "
          + (node.isObject() ? "a mapping without spec" : node.getNodeType().toString().toLowerCase()));
      return Optional.empty();
    }
    return Optional.of(node.toString());
  }
}
