package dev.bulletin.runtime.scheduler.impl;

import dev.bulletin.protocol.Text;
import dev.bulletin.runtime.scheduler.plan.LatencyHistogram;
import dev.bulletin.runtime.scheduler.plan.PassStats;
import dev.bulletin.runtime.scheduler.plan.Placement;
import dev.bulletin.runtime.scheduler.plan.Plan;
import dev.bulletin.runtime.scheduler.plan.Preemption;
import dev.bulletin.runtime.scheduler.plan.Rejection;
import dev.bulletin.runtime.scheduler.plan.WaitCode;
import dev.bulletin.runtime.scheduler.policy.PolicyConfig;
import dev.bulletin.runtime.scheduler.policy.QosClass;
import dev.bulletin.runtime.scheduler.snapshot.QueuedCall;
import dev.bulletin.runtime.scheduler.snapshot.Snapshot;
import dev.bulletin.runtime.scheduler.snapshot.Usage;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.LongSupplier;

/**
 * One scheduling pass: the snapshot resolved into arrays, the counters, the index, and the
 * results as they accumulate. Two phases: first every call in queue order that would run
 * non-preemptible (in quota, a non-preemptible QoS), which may plan preemptions; then the
 * preemptible calls (preemptible QoS, or borrowing over quota) in the same order, on what is
 * left idle. So borrowed work never takes capacity an in-quota call of this pass could use.
 * Stages see it as a {@link PassView}; the pass alone places, bumps counters and takes capacity.
 */
final class Pass implements PassView {
  private final PolicyConfig policy;
  private final Usage usage;
  private final boolean explainWaiting;
  private final Instant now;
  private final long nowMillis;
  private final Names users = new Names();
  private final Names groups = new Names();
  private final Names qosNames = new Names();
  private final ClusterIndex index;
  private final Counters counters;
  private final PolicyScheduler.Stages stages;
  private final LongSupplier ticker;
  private final CallRow[] rows;
  private final RunningRows running;
  /**
   * What the running calls and this pass's placements hold, built at the first question (an
   * estimate, a reservation; see {@link #holdings}); until then what the pass placed.
   */
  private List<Holding> holdings;
  private final List<Holding> placedHoldings = new ArrayList<>();
  private final PreemptionPlanner planner;
  private final Selector selector;

  private final List<Placement> placements = new ArrayList<>();
  private final List<Preemption> preemptions = new ArrayList<>();
  private final List<Rejection> infeasible = new ArrayList<>();
  private final List<CallRow> waiting = new ArrayList<>();
  private final List<CallRow> deferred = new ArrayList<>();
  private final LatencyHistogram decisionLatency = new LatencyHistogram();
  private final LatencyHistogram placementLatency = new LatencyHistogram();
  private int preemptors;
  /** Every queued call asks for whole GPUs: none fits where no GPU is free. */
  private boolean onlyWholeGpus = true;
  private boolean lending;
  private double lent;
  private double lendable = Integer.MAX_VALUE;
  private final Map<ReasonKey, Verdict> reasons = new HashMap<>();

  /** What a wait reason depends on; equal keys give the same words. */
  private record ReasonKey(String kind, long a, long b, long c, Object extra) {}

  /** {@code rows} are the snapshot's workers' ({@link WorkerRows#of}). */
  Pass(Snapshot snapshot, Instant now, WorkerRows rows, LongSupplier ticker,
      PolicyScheduler.Stages stages) {
    this.policy = snapshot.policy();
    this.usage = snapshot.usage();
    this.explainWaiting = snapshot.explainWaiting();
    this.now = now;
    this.nowMillis = now.toEpochMilli();
    this.ticker = ticker;
    this.stages = stages;
    for (String name : policy.qos().keySet()) {
      qosNames.id(name);
    }
    this.running = new RunningRows(snapshot.running(), users, groups, qosNames);
    this.index = new ClusterIndex(rows, running.special);
    for (QueuedCall call : snapshot.queue()) {
      users.id(call.user());
      groups.id(call.group());
    }
    this.counters = new Counters(users, groups, qosNames, policy, usage);
    this.lent = running.count(counters);
    this.rows = resolve(snapshot.queue());
    honourCredits();
    this.planner = new PreemptionPlanner(running.special, index, nowMillis);
    this.selector = new Selector(stages.filters(), stages.scores(), index, policy, nowMillis);
  }

  @Override
  public PolicyConfig policy() {
    return policy;
  }

  @Override
  public Usage usage() {
    return usage;
  }

  @Override
  public Instant now() {
    return now;
  }

  @Override
  public long nowMillis() {
    return nowMillis;
  }

  @Override
  public Counters counters() {
    return counters;
  }

  @Override
  public ClusterIndex index() {
    return index;
  }

  @Override
  public int qosId(String name) {
    return qosNames.find(name);
  }

  /** Users the pass knows (queued or running), by their interned ids 0..n-1. */
  int userCount() {
    return users.size();
  }

  private CallRow[] resolve(List<QueuedCall> queue) {
    CallRow[] resolved = new CallRow[queue.size()];
    Set<String> ids = new HashSet<>(2 * queue.size()); // sized once: a full pass holds 64,000
    for (int i = 0; i < resolved.length; i++) {
      QueuedCall call = queue.get(i);
      if (!ids.add(call.id())) {
        throw new IllegalArgumentException("snapshot: queued call id '" + call.id()
            + "' appears twice");
      }
      QosClass qos = policy.qosFor(call.qos()).orElse(null);
      resolved[i] = new CallRow(call, i, users.find(call.user()), groups.find(call.group()),
          qos == null ? -1 : qosNames.find(qos.name()), qos, policy.group(call.group()),
          policy.limitFor(call.user()));
      if (call.keptLive()) {
        resolved[i].keeper = index.keeper(resolved[i]);
      }
      onlyWholeGpus &= resolved[i].gpus > 0 && !resolved[i].fractional();
    }
    return resolved;
  }

  /** A group's offers are honoured oldest first while its balance covers them. */
  private void honourCredits() {
    List<CallRow> offers = new ArrayList<>();
    for (CallRow row : rows) {
      if (row.call.creditsSpent() > 0) {
        offers.add(row);
      }
    }
    offers.sort((a, b) -> a.submittedMillis != b.submittedMillis
        ? Long.compare(a.submittedMillis, b.submittedMillis) : Integer.compare(a.index, b.index));
    double[] left = counters.groupCreditsCopy();
    for (CallRow row : offers) {
      long offer = row.call.creditsSpent();
      if (left[row.group] >= offer) {
        left[row.group] -= offer;
        row.boost = offer;
      } else {
        row.creditsShort = true;
      }
    }
  }

  /** The resolved call with this id (stage tests run single stages against a pass). */
  CallRow row(String callId) {
    for (CallRow row : rows) {
      if (row.id().equals(callId)) {
        return row;
      }
    }
    throw new IllegalArgumentException("no queued call " + callId);
  }

  CallRow[] rows() {
    return rows.clone();
  }

  @Override
  public Verdict waitFor(String kind, long a, long b, long c, Object extra,
      java.util.function.Supplier<Verdict> build) {
    ReasonKey key = new ReasonKey(kind, a, b, c, extra);
    Verdict verdict = reasons.get(key);
    if (verdict == null) {
      verdict = build.get();
      reasons.put(key, verdict);
    }
    return verdict;
  }

  @Override
  public boolean lending() {
    return lending;
  }

  @Override
  public double lentGpus() {
    return lent;
  }

  @Override
  public double lendableGpus() {
    return lendable;
  }

  /** What the running calls and this pass's placements hold, and until when. */
  private List<Holding> holdings() {
    if (holdings == null) {
      holdings = running.holdings(index, nowMillis, policy.preemptionGrace().toMillis());
      holdings.addAll(placedHoldings);
    }
    return holdings;
  }

  Plan run() {
    long start = ticker.getAsLong();
    reserveForBigCalls();
    QueueOrder order = new QueueOrder(rows, users.size(), counters);
    for (CallRow row = order.next(); row != null && !nothingMoreFits(); row = order.next()) {
      if (!row.decided) {
        decide(row, false);
      }
    }
    for (CallRow row : rows) { // what the order did not reach, if it stopped: in any order now
      if (!row.decided) {
        decide(row, false);
      }
    }
    lending = true;
    lendable = LendingCheck.lendableGpus(policy, counters, groups, index);
    for (CallRow row : deferred) {
      decide(row, true);
    }
    Plan plan = new Plan(placements, preemptions,
        explainWaiting ? stages.explainer().explain(this, waiting, holdings()) : List.of(),
        infeasible,
        new PassStats(rows.length, placements.size(), preemptions.size(),
            ticker.getAsLong() - start, decisionLatency, placementLatency, selector.filtered()),
        stages.explainer().revisitAt(this, waiting));
    return plan;
  }

  /**
   * Backfill: the oldest big calls that waited too long are decided first, and each that still
   * finds no room (and is not already reclaiming preemptible GPUs) reserves the worker where its
   * GPUs free soonest; the rest of the pass uses that worker only for calls that end before.
   */
  private void reserveForBigCalls() {
    // A reserved call may reclaim preemptible work, so that work frees its GPUs within the grace.
    long reclaimedBy = policy.maxPreemptorsPerPass() > 0
        ? nowMillis + policy.preemptionGrace().toMillis() : Long.MAX_VALUE;
    for (CallRow row : Reservations.candidates(rows, policy.backfill(), index.maxGpus,
        nowMillis)) {
      int waitingBefore = waiting.size();
      decide(row, false);
      if (waiting.size() == waitingBefore || row.preemptible
          || row.waitCode != WaitCode.CAPACITY) {
        continue;
      }
      Reservations.Reservation reservation =
          index.reservations.reserve(row, index, holdings(), nowMillis, reclaimedBy);
      if (reservation == null) {
        continue;
      }
      long in = Math.max(0, row.reservedFrom.toEpochMilli() - nowMillis);
      int reclaimable = reservation.reclaimable;
      row.waitWith(WaitCode.CAPACITY, row.waitReason + "; " + Text.count(row.gpus, "GPU")
          + " on worker " + row.reservedWorker + " are reserved for it (free "
          + (in == 0 ? "now" : "in " + Text.duration(java.time.Duration.ofMillis(in))
          + " at the latest") + (reclaimable == 0 ? "" : ", " + reclaimable + " of them by"
          + " stopping preemptible work") + "; only calls that end before then may use them)");
    }
  }

  /**
   * The rest of the order cannot change the plan: nothing is explained (positions), no GPU is
   * free, every call wants whole GPUs and no preemption can be planned. The calls left are then
   * decided in any order (for rejections and revisits), without the order's heap: on a full
   * cluster, 2,000 users below their cap made a refill pass order 8,000 calls to place a few.
   */
  private boolean nothingMoreFits() {
    return !explainWaiting && onlyWholeGpus && index.maxFree() <= 0
        && (!planner.hasVictims() || preemptors >= policy.maxPreemptorsPerPass());
  }

  /** Runs the chain for one call; in the lending phase only preemptible calls come here. */
  private void decide(CallRow row, boolean lending) {
    row.decided = true;
    long t0 = ticker.getAsLong();
    boolean placed = false;
    Verdict verdict = Verdict.PASS;
    for (CallCheck check : stages.checks()) {
      verdict = check.check(row, this);
      if (verdict.kind != Verdict.Kind.PASS) {
        break;
      }
    }
    if (verdict.kind == Verdict.Kind.NEVER) {
      infeasible.add(new Rejection(row.id(), verdict.reason));
    } else if (verdict.kind == Verdict.Kind.WAIT) {
      row.waitWith(verdict.code, verdict.reason);
      waiting.add(row);
    } else if (row.preemptible && !lending) {
      deferred.add(row);
    } else if (selector.select(row)) {
      place(row, selector.chosenWorker, selector.chosenGpus);
      placed = true;
    } else {
      // A call held to the worker that keeps its values does not stop calls elsewhere.
      if (!row.preemptible && row.keeper < 0) {
        reclaim(row);
      }
      waiting.add(row);
    }
    long took = ticker.getAsLong() - t0;
    decisionLatency.record(took);
    if (placed) {
      placementLatency.record(took);
    }
  }

  private void place(CallRow row, int w, long gpus) {
    index.reservations.placed(row, w, nowMillis);
    if (row.fractional()) {
      index.takeShare(w, Long.numberOfTrailingZeros(gpus), row.eighths, row.cpus, row.memory);
    } else {
      index.take(w, gpus, row.cpus, row.memory);
    }
    if (row.preemptible) {
      lent += row.share;
    }
    counters.add(row.user, row.group, row.qosId, row.share, row.preemptible);
    Holding held = new Holding(w, row.user, row.group, row.qosId, row.fractional() ? 0 : row.gpus,
        row.share, row.cpus, row.memory, row.preemptible, nowMillis + row.walltimeMillis);
    (holdings == null ? placedHoldings : holdings).add(held);
    List<Integer> ids = new ArrayList<>(row.gpus);
    for (int id : GpuPicker.ids(gpus)) {
      ids.add(id);
    }
    placements.add(new Placement(row.id(), index.workers[w].id(), ids, row.preemptible,
        row.boost));
  }

  /** An entitled call that found no room may stop preemptible calls for it. */
  private void reclaim(CallRow row) {
    Integer stopping = running.stoppingFor.get(row.id());
    if (stopping != null) {
      row.waitWith(WaitCode.PREEMPTING, "waiting for " + Text.count(stopping, "preempted call")
          + " to stop and give back their GPUs");
      return;
    }
    if (!planner.hasVictims() || preemptors >= policy.maxPreemptorsPerPass()) {
      return;
    }
    if (!planner.plan(row, index, nowMillis)) {
      return;
    }
    double perSecond = row.fractional() ? row.share : Math.max(1, row.gpus);
    double waited = Math.max(0, nowMillis - row.submittedMillis) / 1000.0 * perSecond;
    double needed = policy.reclaimPatience() * planner.chosenLost;
    if (waited < needed) {
      long seconds = (long) Math.ceil((needed - waited) / perSecond);
      row.reclaimAt = now.plusSeconds(seconds);
      row.waitWith(row.waitCode, row.waitReason + "; preemptible work is reclaimed for it in "
          + Text.duration(java.time.Duration.ofSeconds(seconds)) + " unless GPUs free first");
      return;
    }
    planner.commit();
    preemptors++;
    String worker = index.workers[planner.chosenWorker].id();
    double lost = 0;
    for (PreemptionPlanner.Victim victim : planner.chosen) {
      preemptions.add(new Preemption(victim.call.id(), worker, row.id(), victim.lost));
      lost += victim.lost;
    }
    int count = planner.chosen.size();
    row.waitWith(WaitCode.PREEMPTING, String.format(java.util.Locale.ROOT,
        "reclaiming capacity: stopping %s on worker %s (%.0f GPU-seconds of"
            + " unsaved work)", Text.count(count, "preemptible call"), worker, lost));
  }
}
