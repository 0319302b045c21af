package dev.bulletin.runtime.pool.impl;

import dev.bulletin.runtime.pool.ProviderException;
import io.fabric8.kubernetes.client.KubernetesClientException;
import java.util.concurrent.CompletionException;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** Turns the Kubernetes API's refusals into errors that say what to fix. */
final class KubeErrors {
  private KubeErrors() {}

  /** RBAC's wording: {@code User "x" cannot create resource "pods" in API group "" in the ...}. */
  private static final Pattern FORBIDDEN = Pattern.compile(
      "cannot (\\S+) resource \"([^\"]+)\"(?: in API group \"([^\"]*)\")?");

  /**
   * A provider error for {@code doing} (e.g. "create the Pod of worker gpu-1a2b"). A 403 names
   * the missing permission as a Role rule, so the fix is one line of the Role in docs/pools.md.
   */
  static ProviderException of(String doing, String namespace, Throwable error) {
    Throwable cause = error instanceof CompletionException && error.getCause() != null
        ? error.getCause() : error;
    if (cause instanceof ProviderException provider) {
      return provider;
    }
    if (cause instanceof KubernetesClientException k) {
      String said = k.getStatus() != null && k.getStatus().getMessage() != null
          ? k.getStatus().getMessage() : String.valueOf(k.getMessage());
      if (k.getCode() == 403) {
        Matcher m = FORBIDDEN.matcher(said);
        String missing = m.find()
            ? "'" + m.group(1) + "' on '" + m.group(2) + "'"
                + (m.group(3) == null || m.group(3).isEmpty() ? "" : " (API group " + m.group(3) + ")")
            : "a permission the API did not name";
        return new ProviderException("cannot " + doing + ": the runtime's Kubernetes account lacks"
            + " the permission " + missing + " in namespace " + namespace + "; grant it in the"
            + " runtime's Role (docs/pools.md, \"Kubernetes\"). The API said: " + said, cause);
      }
      if (k.getCode() == 0) {
        return new ProviderException("cannot " + doing + ": the Kubernetes API did not answer ("
            + said + "); check the runtime's kubeconfig or in-cluster service account", cause);
      }
      return new ProviderException("cannot " + doing + " (HTTP " + k.getCode() + "): " + said, cause);
    }
    return new ProviderException("cannot " + doing + ": " + cause, cause);
  }
}
