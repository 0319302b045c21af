package dev.bulletin.runtime.scheduler.sim;

import dev.bulletin.runtime.scheduler.snapshot.QueuedCall;
import java.time.Duration;
import java.time.Instant;
import java.util.Map;

/** One call of a trace, with what happened to it in one simulated run. */
final class SimCall {
  final String id;
  final String user;
  final String group;
  final String qos;
  final int gpus;
  final double cpus;
  final long memory;
  /** Seconds of work it needs on its GPUs. */
  final double work;
  final Duration walltime;
  final Map<String, Long> inputs;
  /** Seconds between checkpoints (0: none; a preempted call restarts from scratch). */
  final double checkpointEvery;
  final long credits;
  /** Set by the lab simulation: the notebook cell it belongs to. */
  Object cell;
  /** Set by the lab simulation: the resident state of the session this call's cell runs in. */
  Object state;
  /**
   * The worker that keeps the resident values it reads, or "": the runtime's
   * {@code TaskSpec.prefer_worker}, passed to the scheduler as {@link QueuedCall#preferredWorker}.
   * Set before the call is submitted.
   */
  String preferredWorker = "";
  /**
   * The key of the session whose GPU state it reads, or "": {@link QueuedCall#residentSession}.
   * Set before the call is submitted.
   */
  String residentSession = "";

  long submitMillis;
  double remaining;
  long firstStartMillis = -1;
  long startMillis;
  long endMillis = -1;
  int preemptions;
  int epoch;
  double lostGpuSeconds;
  boolean infeasible;
  /** GPU ids it got (last placement), and whether they sit close (all pairs NVLink/switch). */
  int[] gpuIds = new int[0];
  boolean closeGpus;
  long localInputBytes;
  /** Seconds it held its GPUs before its work at its latest start, and over all its starts. */
  double startOverhead;
  double overheadSeconds;
  private QueuedCall queued;

  SimCall(String id, String user, String group, String qos, int gpus, double cpus, long memory,
      double work, Duration walltime, Map<String, Long> inputs, double checkpointEvery,
      long credits) {
    this.id = id;
    this.user = user;
    this.group = group;
    this.qos = qos;
    this.gpus = gpus;
    this.cpus = cpus;
    this.memory = memory;
    this.work = work;
    this.remaining = work;
    this.walltime = walltime;
    this.inputs = inputs;
    this.checkpointEvery = checkpointEvery;
    this.credits = credits;
  }

  /** A fresh copy of the trace entry, for another run of the same trace. */
  SimCall copy() {
    SimCall copy = new SimCall(id, user, group, qos, gpus, cpus, memory, work, walltime, inputs,
        checkpointEvery, credits);
    copy.submitMillis = submitMillis;
    return copy;
  }

  QueuedCall queued() {
    if (queued == null) {
      queued = QueuedCall.builder().id(id).user(user).group(group).qos(qos).gpus(gpus).cpus(cpus)
          .memoryBytes(memory).creditsSpent(credits).inputs(inputs)
          .submittedAt(Instant.ofEpochMilli(submitMillis)).walltime(walltime)
          .preferredWorker(preferredWorker).residentSession(residentSession).build();
    }
    return queued;
  }

  long inputBytes() {
    long total = 0;
    for (long size : inputs.values()) {
      total += size;
    }
    return total;
  }

  double waitSeconds() {
    return (firstStartMillis - submitMillis) / 1000.0;
  }

  boolean done() {
    return endMillis >= 0;
  }
}
