package dev.bulletin.runtime.scheduler.sim;

import dev.bulletin.runtime.scheduler.ClusterScheduler;
import dev.bulletin.runtime.scheduler.plan.LatencyHistogram;
import dev.bulletin.runtime.scheduler.plan.Placement;
import dev.bulletin.runtime.scheduler.plan.Plan;
import dev.bulletin.runtime.scheduler.plan.Preemption;
import dev.bulletin.runtime.scheduler.plan.Rejection;
import dev.bulletin.runtime.scheduler.policy.PolicyConfig;
import dev.bulletin.runtime.scheduler.policy.QosClass;
import dev.bulletin.runtime.scheduler.snapshot.QueuedCall;
import dev.bulletin.runtime.scheduler.snapshot.RunningCall;
import dev.bulletin.runtime.scheduler.snapshot.Snapshot;
import dev.bulletin.runtime.scheduler.snapshot.Usage;
import dev.bulletin.runtime.scheduler.snapshot.WorkerState;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * Drives the policy scheduler as the runtime will: each pass builds a {@link Snapshot} from the
 * simulated cluster, the queue and the usage ledger, and applies the {@link Plan} (start the
 * placements, signal the victims and stop them after the grace period, drop the infeasible).
 * The ledger decays recent usage with a half-life and accrues credits by the policy's rule.
 */
final class PolicyDriver extends BaseDriver {
  private final ClusterScheduler scheduler;
  private final PolicyConfig policy;
  private final Map<String, Integer> workerIndex = new HashMap<>();
  private final Map<String, Double> groupRecent = new HashMap<>();
  private final Map<String, Double> groupHours = new HashMap<>();
  private final Map<String, Double> groupCredits = new HashMap<>();
  private final Map<String, Double> userRecent = new HashMap<>();
  private final double halfLifeSeconds;
  private long ledgerMillis;
  final LatencyHistogram decisions = new LatencyHistogram();
  final LatencyHistogram placements = new LatencyHistogram();
  long passNanos;
  long maxPassNanos;
  int preemptions;
  int infeasible;
  double creditsSpent;
  /** Waiting calls per pass, by the code of their reason: where waiting time goes. */
  final Map<dev.bulletin.runtime.scheduler.plan.WaitCode, Long> waitsByCode =
      new java.util.EnumMap<>(dev.bulletin.runtime.scheduler.plan.WaitCode.class);

  private final WorkerState[] states;
  private final int[] stateVersions;

  PolicyDriver(Des des, List<SimWorker> workers, PolicyConfig policy, long seed,
      double passIntervalSeconds, Duration usageHalfLife, java.util.function.LongSupplier ticker) {
    super(des, workers, passIntervalSeconds);
    this.policy = policy;
    this.scheduler = ClusterScheduler.create(des.clock, seed, ticker);
    this.states = new WorkerState[workers.size()];
    this.stateVersions = new int[workers.size()];
    this.halfLifeSeconds = usageHalfLife.toSeconds();
    this.ledgerMillis = des.now();
    for (int w = 0; w < workers.size(); w++) {
      workerIndex.put(workers.get(w).id, w);
    }
  }

  void grantCredits(String group, double credits) {
    groupCredits.merge(group, credits, Double::sum);
  }

  @Override
  void schedule() {
    updateLedger();
    Plan plan = scheduler.plan(snapshot());
    decisions.merge(plan.stats().decisionLatency());
    placements.merge(plan.stats().placementLatency());
    passNanos += plan.stats().passNanos();
    maxPassNanos = Math.max(maxPassNanos, plan.stats().passNanos());
    for (var wait : plan.waiting()) {
      waitsByCode.merge(wait.info().code(), 1L, Long::sum);
    }
    for (Placement placement : plan.placements()) {
      SimCall call = queue.get(placement.callId());
      long mask = 0;
      for (int gpu : placement.gpuIds()) {
        mask |= 1L << gpu;
      }
      if (placement.creditsCharged() > 0) {
        groupCredits.merge(call.group, -placement.creditsCharged(), Double::sum);
        creditsSpent += placement.creditsCharged();
      }
      start(call, workerIndex.get(placement.workerId()), mask, placement.preemptible());
    }
    for (Preemption preemption : plan.preemptions()) {
      Running victim = running.get(preemption.victimId());
      victim.preemptedFor = preemption.forCallId();
      preemptions++;
      des.after(policy.preemptionGrace().toSeconds(), () -> preempt(victim));
    }
    for (Rejection rejection : plan.infeasible()) {
      SimCall call = queue.remove(rejection.callId());
      call.infeasible = true;
      infeasible++;
      onDone.accept(call);
    }
  }

  /** Decays recent usage, adds what was held since the last pass, accrues credits. */
  private void updateLedger() {
    double seconds = (des.now() - ledgerMillis) / 1000.0;
    ledgerMillis = des.now();
    if (seconds <= 0) {
      return;
    }
    double decay = Math.pow(0.5, seconds / halfLifeSeconds);
    groupRecent.replaceAll((k, v) -> v * decay);
    userRecent.replaceAll((k, v) -> v * decay);
    Map<String, Double> inQuota = new HashMap<>();
    for (Running run : running.values()) {
      double gpuSeconds = run.call.gpus * seconds;
      groupRecent.merge(run.call.group, gpuSeconds, Double::sum);
      userRecent.merge(run.call.user, gpuSeconds, Double::sum);
      groupHours.merge(run.call.group, gpuSeconds / 3600, Double::sum);
      if (!run.preemptible) {
        inQuota.merge(run.call.group, (double) run.call.gpus, Double::sum);
      }
    }
    for (String group : policy.groups().keySet()) {
      double balance = groupCredits.getOrDefault(group, 0.0);
      groupCredits.put(group, policy.credits().earn(policy.group(group), balance,
          inQuota.getOrDefault(group, 0.0), Duration.ofMillis(Math.round(seconds * 1000))));
    }
  }

  Snapshot snapshot() {
    for (int w = 0; w < workers.size(); w++) {
      SimWorker worker = workers.get(w);
      if (states[w] != null && stateVersions[w] == worker.version) {
        continue;
      }
      Set<Integer> free = new TreeSet<>();
      for (long m = worker.freeMask; m != 0; m &= m - 1) {
        free.add(Long.numberOfTrailingZeros(m));
      }
      states[w] = new WorkerState(worker.id, worker.topology, free, worker.cpus,
          Math.max(0, worker.freeCpus), worker.memory, Math.max(0, worker.freeMemory),
          worker.held, false, WorkerState.NEVER, worker.resident);
      stateVersions[w] = worker.version;
    }
    List<RunningCall> calls = new ArrayList<>(running.size());
    for (Running run : running.values()) {
      SimCall call = run.call;
      List<Integer> ids = new ArrayList<>();
      for (int id : call.gpuIds) {
        ids.add(id);
      }
      QosClass qos = policy.qosFor(call.qos).orElseThrow();
      calls.add(RunningCall.builder().id(call.id).user(call.user).group(call.group)
          .qos(qos.name()).on(workers.get(run.worker).id, ids).cpus(call.cpus)
          .memoryBytes(call.memory).preemptible(run.preemptible)
          .startedAt(Instant.ofEpochMilli(call.startMillis))
          .walltime(call.walltime.isZero() ? qos.maxWalltime() : call.walltime)
          .savedAt(Instant.ofEpochMilli(des.now() - Math.round(unsaved(run) * 1000)))
          .preemptedFor(run.preemptedFor).build());
    }
    List<QueuedCall> queued = new ArrayList<>(queue.size());
    for (SimCall call : queue.values()) {
      queued.add(call.queued());
    }
    Map<String, Usage.GroupUsage> groups = new HashMap<>();
    for (String group : groupRecent.keySet()) {
      groups.put(group, new Usage.GroupUsage(groupRecent.get(group),
          groupHours.getOrDefault(group, 0.0), Math.max(0, groupCredits.getOrDefault(group, 0.0)),
          Instant.MAX));
    }
    for (String group : groupCredits.keySet()) {
      groups.putIfAbsent(group, new Usage.GroupUsage(0, 0,
          Math.max(0, groupCredits.get(group)), Instant.MAX));
    }
    return new Snapshot(List.of(states), calls, queued, new Usage(groups, userRecent), policy);
  }
}
