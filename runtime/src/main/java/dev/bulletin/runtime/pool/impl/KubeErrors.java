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
      String said = said(k);
      if (k.getCode() == 403) {
        return new ProviderException("cannot " + doing + ": the runtime's Kubernetes account lacks"
            + " the permission " + missing(said) + " in namespace " + namespace + "; grant it in the"
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

  /** What the API said: its Status's message, else the client's. */
  private static String said(KubernetesClientException k) {
    return k.getStatus() != null && k.getStatus().getMessage() != null
        ? k.getStatus().getMessage() : String.valueOf(k.getMessage());
  }

  /** The permission a 403's message names, as "'get' on 'pods/log'". */
  private static String missing(String said) {
    Matcher m = FORBIDDEN.matcher(said);
    return m.find()
        ? "'" + m.group(1) + "' on '" + m.group(2) + "'"
            + (m.group(3) == null || m.group(3).isEmpty() ? "" : " (API group " + m.group(3) + ")")
        : "a permission the API did not name";
  }

  /**
   * Why a request that is only a help failed, short (at most {@value #BRIEF} characters), for a
   * reason that carries it: a 403 names the missing permission and the Role to grant it in.
   */
  static String briefly(String namespace, Throwable error) {
    Throwable cause = error instanceof CompletionException && error.getCause() != null
        ? error.getCause() : error;
    String out;
    if (cause instanceof KubernetesClientException k) {
      String said = said(k);
      out = switch (k.getCode()) {
        case 403 -> "the runtime's Kubernetes account lacks the permission " + missing(said)
            + " in namespace " + namespace + " (the Role of docs/pools.md grants it)";
        case 0 -> "the Kubernetes API did not answer (" + said + ")";
        default -> "HTTP " + k.getCode() + ": " + said;
      };
    } else {
      out = String.valueOf(cause);
    }
    return out.length() <= BRIEF ? out : out.substring(0, BRIEF - 3) + "...";
  }

  static final int BRIEF = 400;
}
