package dev.bulletin.runtime.scheduler.impl;

/**
 * Resources a call holds and when it gives them back at the latest: a running call (its start
 * plus walltime, or the grace period when it is being preempted) or one this pass placed.
 */
record Holding(int worker, int user, int group, int qos, int gpus, double cpus, long memory,
    boolean preemptible, long endMillis) {}
