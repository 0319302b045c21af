package dev.bulletin.runtime.pool;

import java.time.Instant;
import java.util.Optional;

/**
 * A pool worker the runtime has registered, as the runtime reports it on every tick.
 *
 * @param workerId the id it registered with ({@code --worker-id})
 * @param runningCalls calls running on it now
 * @param idleSince when its last call ended (or when it registered); read when runningCalls is 0
 * @param expiresAt the {@code --expires-at} it reported, if any
 */
public record RegisteredWorker(String workerId, int runningCalls, Instant idleSince,
    Optional<Instant> expiresAt) {
  public RegisteredWorker {
    if (workerId == null || idleSince == null || expiresAt == null || runningCalls < 0) {
      throw new IllegalArgumentException("a registered worker needs an id, idleSince, an expiry"
          + " (or none) and runningCalls >= 0");
    }
  }

  public static RegisteredWorker idle(String workerId, Instant since) {
    return new RegisteredWorker(workerId, 0, since, Optional.empty());
  }

  public static RegisteredWorker busy(String workerId, int calls, Instant since) {
    return new RegisteredWorker(workerId, calls, since, Optional.empty());
  }
}
