package dev.bulletin.runtime.scheduler.plan;

import java.util.List;

/**
 * Run this call on this worker with these GPUs.
 *
 * @param preemptible it runs as preemptible (a preemptible QoS, or borrowed capacity over its
 *     group's quota): the runtime records it so later passes may choose it as a victim
 * @param creditsCharged credits the runtime takes from the group's balance for the boost
 */
public record Placement(
    String callId, String workerId, List<Integer> gpuIds, boolean preemptible,
    double creditsCharged) {
  public Placement {
    gpuIds = List.copyOf(gpuIds);
  }
}
