package dev.bulletin.runtime.scheduler.impl;

/**
 * Resources a call holds and when it gives them back at the latest: a running call (its start
 * plus walltime, or the grace period when it is being preempted) or one this pass placed.
 * {@code gpus} are the whole GPUs it gives back (0 for a share of a GPU, which frees a whole
 * GPU only with its last sharer: estimates leave it out); {@code share} is what quotas count.
 */
record Holding(int worker, int user, int group, int qos, int gpus, double share, double cpus,
    long memory, boolean preemptible, long endMillis) {}
