package dev.bulletin.runtime.pool.impl;

import io.fabric8.kubernetes.api.model.authorization.v1.SelfSubjectAccessReview;
import io.fabric8.kubernetes.api.model.authorization.v1.SelfSubjectAccessReviewBuilder;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientException;
import java.util.ArrayList;
import java.util.List;

/**
 * What the runtime's Kubernetes account may do in a namespace, asked of the API server itself
 * (SelfSubjectAccessReview, which every authenticated account may create): a start-up check
 * that names each missing permission before the first launch would fail on it.
 */
public final class KubernetesAccess {
  private KubernetesAccess() {}

  /** A permission the provider uses: verb on resource (with subresource, e.g. pods/log). */
  public record Permission(String verb, String resource) {
    @Override
    public String toString() {
      return verb + " " + resource;
    }
  }

  /** Everything the provider does; the Role of docs/pools.md grants exactly these. */
  public static final List<Permission> REQUIRED = List.of(
      new Permission("create", "pods"), new Permission("delete", "pods"),
      new Permission("get", "pods"), new Permission("list", "pods"),
      new Permission("watch", "pods"), new Permission("get", "pods/log"),
      new Permission("list", "events"), new Permission("create", "secrets"),
      new Permission("delete", "secrets"));

  /**
   * The permissions of {@link #REQUIRED} the client's account lacks in {@code namespace}.
   *
   * @throws KubernetesClientException when the API server cannot be asked
   */
  public static List<Permission> missing(KubernetesClient client, String namespace) {
    List<Permission> out = new ArrayList<>();
    for (Permission p : REQUIRED) {
      String[] parts = p.resource().split("/", 2);
      SelfSubjectAccessReview review = client.authorization().v1().selfSubjectAccessReview()
          .create(new SelfSubjectAccessReviewBuilder().withNewSpec().withNewResourceAttributes()
              .withNamespace(namespace).withVerb(p.verb()).withGroup("").withResource(parts[0])
              .withSubresource(parts.length > 1 ? parts[1] : null).endResourceAttributes()
              .endSpec().build());
      if (review.getStatus() == null || !Boolean.TRUE.equals(review.getStatus().getAllowed())) {
        out.add(p);
      }
    }
    return out;
  }

  /**
   * Start-up check of one namespace: IllegalArgumentException naming the field, the missing
   * permissions, and the fix.
   */
  public static void check(KubernetesClient client, String namespace, String label) {
    List<Permission> missing;
    try {
      missing = missing(client, namespace);
    } catch (KubernetesClientException e) {
      throw new IllegalArgumentException(label + ".provider: kubernetes cannot ask the API server"
          + " at " + client.getMasterUrl() + " what the runtime may do (" + e.getMessage()
          + "); check $KUBECONFIG, ~/.kube/config or the runtime Pod's service account", e);
    }
    if (!missing.isEmpty()) {
      throw new IllegalArgumentException(label + ".kubernetes.namespace: the runtime's Kubernetes"
          + " account lacks " + missing + " in namespace " + namespace + "; apply the Role of"
          + " docs/pools.md (\"Kubernetes\") there and bind it to the account");
    }
  }
}
