package dev.bulletin.runtime.scheduler.plan;

/**
 * What one pass cost. {@code decisionLatency} holds every call the pass decided about;
 * {@code placementLatency} only those it placed (the "per placement" latency).
 */
public record PassStats(
    int decisions, int placements, int preemptions, long passNanos,
    LatencyHistogram decisionLatency, LatencyHistogram placementLatency) {}
