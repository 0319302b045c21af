package dev.bulletin.runtime.scheduler.impl;

import dev.bulletin.runtime.scheduler.plan.WaitCode;
import dev.bulletin.runtime.scheduler.policy.GroupQuota;
import dev.bulletin.runtime.scheduler.policy.QosClass;
import dev.bulletin.runtime.scheduler.policy.UserLimit;
import dev.bulletin.runtime.scheduler.snapshot.QueuedCall;

/** One queued call resolved against the policy and interned for the pass's hot loop. */
final class CallRow {
  final QueuedCall call;
  final int index;
  final int user;
  final int group;
  /** The pass's id of its QoS class; -1 (and {@link #qos} null) if the policy has no such class. */
  final int qosId;
  /** Its QoS class, resolved once when the pass starts; every stage reads this one. */
  final QosClass qos;
  final GroupQuota quota;
  final UserLimit limit;
  /** GPUs it runs on: its whole GPUs, or 1 for a share of one GPU. */
  final int gpus;
  /** A fractional call's share of its GPU in eighths (1..7); 0 for whole GPUs. */
  final int eighths;
  /** GPUs as quotas, limits, lending and fair share count them (0.5 for half a GPU). */
  final double share;
  /**
   * Its GPU need in eighths (8 per whole GPU): a larger need never fits where a smaller one
   * did not (a whole GPU is a GPU with all eighths free), so failed shapes compare by it.
   */
  final int units;
  final double cpus;
  final long memory;
  final long submittedMillis;
  /** The walltime asked for, or the QoS maximum when none was; 0 if the QoS is unknown. */
  final long walltimeMillis;
  /** The walltime asked for (0: none). */
  final long askedMillis;
  final long inputBytes;

  /** Credits honoured for ordering (0 when the group's balance cannot cover the offer). */
  double boost;
  boolean creditsShort;
  /** Set by the quota stage: runs as preemptible (its QoS is, or it borrows over quota). */
  boolean preemptible;
  /** Why it is over quota, when it borrows. */
  String borrowReason;

  WaitCode waitCode;
  String waitReason;
  /** When its patience runs out and it will reclaim lent GPUs (null: no reclaim planned). */
  java.time.Instant reclaimAt;
  /** When and where its backfill reservation starts (null: it holds none). */
  java.time.Instant reservedFrom;
  String reservedWorker;
  /** Decided in this pass: ahead of the queue order (a reservation), or in it. */
  boolean decided;
  /**
   * The index of the worker whose executor keeps values it reads, live on its GPUs
   * ({@link dev.bulletin.runtime.scheduler.snapshot.QueuedCall#keptLive}): it runs there or
   * waits. -1: it may run anywhere (none kept live, the worker is gone, or the call could never
   * fit it).
   */
  int keeper = -1;

  CallRow(QueuedCall call, int index, int user, int group, int qosId, QosClass qos,
      GroupQuota quota, UserLimit limit) {
    this.call = call;
    this.index = index;
    this.user = user;
    this.group = group;
    this.qosId = qosId;
    this.qos = qos;
    this.quota = quota;
    this.limit = limit;
    this.gpus = call.demand().gpusTouched();
    this.eighths = call.demand().gpuEighths();
    this.share = call.demand().gpuShare();
    this.units = eighths > 0 ? eighths : gpus * dev.bulletin.runtime.scheduler.Demand.EIGHTHS;
    this.cpus = call.demand().cpus();
    this.memory = call.demand().memoryBytes();
    this.submittedMillis = call.submittedAt().toEpochMilli();
    long asked = call.walltime().toMillis();
    this.askedMillis = asked;
    this.walltimeMillis = asked > 0 ? asked : qos == null ? 0 : qos.maxWalltime().toMillis();
    long bytes = 0;
    for (long size : call.inputs().values()) {
      bytes += size;
    }
    this.inputBytes = bytes;
  }

  boolean fractional() {
    return eighths > 0;
  }

  int qosPriority() {
    return qos == null ? Integer.MIN_VALUE : qos.priority();
  }

  void waitWith(WaitCode code, String reason) {
    this.waitCode = code;
    this.waitReason = reason;
  }

  String id() {
    return call.id();
  }
}
