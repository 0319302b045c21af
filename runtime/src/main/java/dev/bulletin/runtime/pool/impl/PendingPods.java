package dev.bulletin.runtime.pool.impl;

import dev.bulletin.protocol.Text;
import io.fabric8.kubernetes.api.model.Event;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodCondition;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientException;
import java.time.Duration;
import java.time.Instant;
import java.util.Comparator;
import java.util.Optional;

/**
 * Pods that wait for a node: whether one waited too long, and the scheduler's reason in its own
 * words (the PodScheduled condition, else the Pod's latest FailedScheduling event), e.g. "0/3
 * nodes are available: 3 Insufficient nvidia.com/gpu".
 */
final class PendingPods {
  private final KubernetesClient client;

  PendingPods(KubernetesClient client) {
    this.client = client;
  }

  /** Not bound to a node yet (and not being deleted). */
  static boolean unscheduled(Pod pod) {
    return pod.getMetadata().getDeletionTimestamp() == null
        && (pod.getStatus() == null || "Pending".equals(pod.getStatus().getPhase())
            || pod.getStatus().getPhase() == null)
        && (pod.getSpec() == null || pod.getSpec().getNodeName() == null);
  }

  /** Unscheduled for longer than its pool's pending timeout (the Pod's annotation). */
  static boolean overdue(Pod pod, Instant now) {
    return unscheduled(pod) && !now.isBefore(created(pod).plus(timeout(pod)));
  }

  static Duration timeout(Pod pod) {
    String seconds = pod.getMetadata().getAnnotations() == null ? null
        : pod.getMetadata().getAnnotations().get(WorkerPods.PENDING_TIMEOUT);
    try {
      return Duration.ofSeconds(Long.parseLong(seconds));
    } catch (NumberFormatException | NullPointerException e) {
      return dev.bulletin.runtime.pool.KubernetesOptions.DEFAULT_PENDING_TIMEOUT;
    }
  }

  private static Instant created(Pod pod) {
    String at = pod.getMetadata().getCreationTimestamp();
    return at == null ? Instant.now() : Instant.parse(at);
  }

  /** The PodScheduled condition's message when the scheduler refused the Pod. */
  static Optional<String> condition(Pod pod) {
    if (pod.getStatus() == null || pod.getStatus().getConditions() == null) {
      return Optional.empty();
    }
    for (PodCondition c : pod.getStatus().getConditions()) {
      if ("PodScheduled".equals(c.getType()) && "False".equals(c.getStatus())) {
        String why = c.getMessage() != null ? c.getMessage() : c.getReason();
        if (why != null) {
          return Optional.of((c.getReason() != null && c.getMessage() != null
              ? c.getReason() + ": " : "") + why);
        }
      }
    }
    return Optional.empty();
  }

  /** What the report of an overdue Pod says: how long it waited and why. */
  String reason(Pod pod, Instant now) {
    String why = condition(pod).or(() -> latestEvent(pod)).orElse("no scheduler has reported on it"
        + " (no PodScheduled condition or FailedScheduling event; is a scheduler running?)");
    return "Pod " + pod.getMetadata().getNamespace() + "/" + pod.getMetadata().getName()
        + " was not scheduled within its pending timeout (" + Text.duration(timeout(pod))
        + "): " + why;
  }

  /** The Pod's latest FailedScheduling event; a Role without events gets a hint instead. */
  private Optional<String> latestEvent(Pod pod) {
    try {
      return client.v1().events().inNamespace(pod.getMetadata().getNamespace())
          .withField("involvedObject.name", pod.getMetadata().getName()).list().getItems().stream()
          .filter(e -> "FailedScheduling".equals(e.getReason()) && e.getMessage() != null)
          .max(Comparator.comparing(PendingPods::when)).map(e -> e.getReason() + ": " + e.getMessage());
    } catch (KubernetesClientException e) {
      return Optional.of("its events could not be read: " + KubeErrors.of("list events",
          pod.getMetadata().getNamespace(), e).getMessage());
    }
  }

  private static String when(Event e) {
    if (e.getLastTimestamp() != null) {
      return e.getLastTimestamp();
    }
    return e.getEventTime() != null && e.getEventTime().getTime() != null
        ? e.getEventTime().getTime() : "";
  }
}
