package dev.bulletin.runtime.pool;

import java.time.Instant;
import java.util.Optional;

/**
 * One of this cluster's workers as its provider lists it.
 *
 * @param handle which worker
 * @param running false while it waits for resources (a pending Slurm job), true once it runs
 * @param expiresAt when its allocation ends, when the provider knows
 */
public record ProvidedWorker(WorkerHandle handle, boolean running, Optional<Instant> expiresAt) {}
