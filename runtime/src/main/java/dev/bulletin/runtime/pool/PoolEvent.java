package dev.bulletin.runtime.pool;

import java.time.Instant;
import java.util.Optional;

/**
 * One line of the pools' story, for the log and the status page.
 *
 * @param at when
 * @param pool which pool ("" for a worker of no configured pool)
 * @param kind launch, launched, launch-failed, registered, terminate, replace, lost, exited,
 *     adopted, orphan, terminate-failed
 * @param workerId the worker it is about, if one
 * @param message what happened and why
 */
public record PoolEvent(Instant at, String pool, String kind, Optional<String> workerId, String message) {
  @Override
  public String toString() {
    return "pool " + pool + ": " + kind + workerId.map(w -> " " + w).orElse("") + ": " + message;
  }
}
