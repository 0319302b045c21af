package dev.bulletin.runtime.pool;

import java.time.Instant;
import java.util.Optional;

/** One pool at a glance, for {@code bulletin status} and the dashboard. */
public record PoolStatus(String pool, ProviderKind provider, int starting, int idle, int busy,
    int draining, int maxWorkers, Optional<Instant> backoffUntil) {}
