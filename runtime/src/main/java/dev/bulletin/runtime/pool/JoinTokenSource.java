package dev.bulletin.runtime.pool;

import java.time.Duration;
import java.util.Optional;

/**
 * Join tokens for the workers a provider starts (docs/pools.md): in a cluster of worker
 * certificates, each gets a single-use token for its own id, passed in its environment (never
 * argv, where `ps` shows it), and exchanges it for its certificate. Empty: the cluster's
 * workers attach with the shared worker token.
 */
@FunctionalInterface
public interface JoinTokenSource {
  /** A token for {@code workerId}, good for {@code ttl}; empty where workers use the token. */
  Optional<String> issue(String workerId, Duration ttl);

  /** For clusters without worker certificates. */
  static JoinTokenSource none() {
    return (workerId, ttl) -> Optional.empty();
  }

  /**
   * Puts {@code workerId}'s token, if any, in {@code environment} as BULLETIN_JOIN_TOKEN.
   *
   * @param ttl how long the worker may take to start (a batch queue's wait counts)
   */
  default void export(String workerId, Duration ttl, java.util.Map<String, String> environment) {
    issue(workerId, ttl).ifPresent(token -> environment.put("BULLETIN_JOIN_TOKEN", token));
  }
}
