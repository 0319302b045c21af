package dev.bulletin.runtime.scheduler.plan;

import java.util.Map;

/**
 * What one pass cost. {@code decisionLatency} holds every call the pass decided about;
 * {@code placementLatency} only those it placed (the "per placement" latency).
 * {@code filtered} counts, per reason, the workers a filter turned down while the pass looked
 * for room (reasons that turned none down are absent).
 */
public record PassStats(
    int decisions, int placements, int preemptions, long passNanos,
    LatencyHistogram decisionLatency, LatencyHistogram placementLatency,
    Map<FilterReason, Integer> filtered) {

  public PassStats {
    filtered = Map.copyOf(filtered);
  }

  /** Workers {@code reason} turned down in the pass. */
  public int filtered(FilterReason reason) {
    return filtered.getOrDefault(reason, 0);
  }
}
