package dev.bulletin.runtime.scheduler.impl;

import dev.bulletin.runtime.scheduler.policy.PolicyConfig;
import dev.bulletin.runtime.scheduler.snapshot.Usage;
import java.time.Instant;
import java.util.function.Supplier;

/**
 * What the call-level stages, the wait explainer and the estimates read of a pass: the policy,
 * usage, the clock, the counters, the workers' index and the lending state. A stage answers with
 * a {@link Verdict} and may mark its own row; only the {@link Pass} places calls, bumps the
 * counters ({@link Counters#add}) and takes capacity ({@link ClusterIndex#take}).
 */
interface PassView {

  PolicyConfig policy();

  Usage usage();

  Instant now();

  long nowMillis();

  Counters counters();

  ClusterIndex index();

  /** The pass's id of a QoS class, -1 for a name the policy does not have. */
  int qosId(String name);

  /** True in the second phase, when only preemptible calls are placed (on lent GPUs). */
  boolean lending();

  /** GPUs preemptible calls hold (running, and placed in this pass). */
  double lentGpus();

  /** GPUs that may be lent in all (computed when the lending phase starts). */
  double lendableGpus();

  /**
   * A wait verdict, built once per distinct key in the pass: in a deep queue many calls wait
   * for the same reason (one user's fifth interactive call and their sixth), and the words need
   * not be rebuilt for each.
   */
  Verdict waitFor(String kind, long a, long b, long c, Object extra, Supplier<Verdict> build);
}
