package dev.bulletin.runtime.control;

import dev.bulletin.runtime.scheduler.Demand;
import java.util.Optional;

/**
 * What the worker pools are doing for a call no attached worker can take, in its owner's words
 * ("pool gpu is starting a worker for it: Pod bulletin-c1-gpu-3 waits for a node: Unschedulable:
 * 0/3 nodes are available: 3 Insufficient nvidia.com/gpu"). The scheduler knows only attached
 * workers; this is how a waiting call learns that a worker is on its way, or why none comes.
 */
@FunctionalInterface
public interface PoolOutlook {

  /** Clusters without pools. */
  PoolOutlook NONE = demand -> Optional.empty();

  /** Why a call of this size waits on the pools, or empty when no pool could start it a worker. */
  Optional<String> forDemand(Demand demand);
}
