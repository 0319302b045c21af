package dev.bulletin.runtime.pool;

import dev.bulletin.protocol.Text;
import java.time.Duration;
import java.time.Instant;

/**
 * A launch failed: the pool waits {@code delay} before the next attempt.
 *
 * @param pool the pool
 * @param failuresInARow launches failed since the last worker that registered
 * @param delay the wait before the next launch
 * @param retryAt when launches resume
 * @param message what failed (the provider's words, e.g. sbatch's error)
 */
public record BackoffEvent(String pool, int failuresInARow, Duration delay, Instant retryAt,
    String message) {

  public String reason() {
    return "launch failed (" + failuresInARow + " in a row): " + message + "; next attempt in "
        + Text.duration(delay);
  }
}
