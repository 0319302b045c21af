package dev.bulletin.runtime.pool;

import java.time.Instant;
import java.util.Optional;

/**
 * One pool at a glance, for {@code bulletin status} and the dashboard.
 *
 * @param problem why the pool does not grow now, in the provider's words: while launches back
 *     off, the last failure (e.g. a Pod not scheduled in time, with the scheduler's reason);
 *     else why its workers wait to start (a Pod waiting for a node); empty when nothing is wrong
 */
public record PoolStatus(String pool, ProviderKind provider, int starting, int idle, int busy,
    int draining, int maxWorkers, Optional<Instant> backoffUntil, Optional<String> problem) {}
