package dev.bulletin.runtime.scheduler.plan;

/**
 * Stop {@code victimId} (signal, grace period, kill, requeue) to make room for {@code forCallId}.
 * The runtime marks the victim {@code preemptedFor} in later snapshots until it has stopped.
 */
public record Preemption(
    String victimId, String workerId, String forCallId, double lostGpuSeconds) {}
