package dev.bulletin.runtime.scheduler.sim;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;

/**
 * What every simulated scheduler shares: the queue, the running calls, starting and finishing
 * them on the event loop, the workers' stores, and scheduling passes coalesced to at most one per
 * {@code passInterval} (the runtime calls the scheduler on every change and on a timer; a
 * simulation at 100,000 calls batches the changes of a few seconds into one pass).
 */
abstract class BaseDriver {
  final Des des;
  final List<SimWorker> workers;
  final Map<String, SimCall> queue = new LinkedHashMap<>();
  final Map<String, Running> running = new LinkedHashMap<>();
  private final long passIntervalMillis;
  private final int[] bestDistance;
  private boolean passPending;
  private long timerMillis;
  private boolean timerArmed;
  private long lastPass = Long.MIN_VALUE / 2;
  Consumer<SimCall> onDone = call -> {};
  /** Seconds a call holds its GPUs before its work begins (a spill, a restore); none here. */
  StartCost startCost = (call, worker, gpuIds) -> 0;
  double busyGpuSeconds;
  int passes;
  private long heldGpus;
  private double heldIntegral;
  private long heldSince;

  /** Seconds a start costs on the GPUs it got before the call's work (resident state). */
  interface StartCost {
    double seconds(SimCall call, String workerId, int[] gpuIds);
  }

  /** A call holding GPUs. */
  static final class Running {
    final SimCall call;
    final int worker;
    final long gpus;
    final boolean preemptible;
    String preemptedFor = "";

    Running(SimCall call, int worker, long gpus, boolean preemptible) {
      this.call = call;
      this.worker = worker;
      this.gpus = gpus;
      this.preemptible = preemptible;
    }
  }

  BaseDriver(Des des, List<SimWorker> workers, double passIntervalSeconds) {
    this.des = des;
    this.workers = workers;
    this.passIntervalMillis = Math.round(passIntervalSeconds * 1000);
    this.heldSince = des.now();
    int largest = workers.stream().mapToInt(w -> w.topology.gpus()).max().orElse(0);
    bestDistance = new int[largest + 1];
    for (int g = 2; g <= largest && !workers.isEmpty(); g++) {
      bestDistance[g] = SimWorker.bestDistance(workers.get(0).topology, g);
    }
  }

  void submit(SimCall call) {
    call.submitMillis = des.now();
    queue.put(call.id, call);
    requestPass();
    armTimer();
  }

  /** Also pass every {@code seconds} while calls wait, as the runtime's timer does. */
  void timer(double seconds) {
    this.timerMillis = Math.round(seconds * 1000);
  }

  private void armTimer() {
    if (timerMillis > 0 && !timerArmed) {
      timerArmed = true;
      des.at(des.now() + timerMillis, () -> {
        timerArmed = false;
        if (!queue.isEmpty()) {
          requestPass();
          armTimer();
        }
      });
    }
  }

  void requestPass() {
    if (!passPending) {
      passPending = true;
      des.at(Math.max(des.now(), lastPass + passIntervalMillis), this::runPass);
    }
  }

  private void runPass() {
    passPending = false;
    lastPass = des.now();
    passes++;
    schedule();
  }

  /** One scheduling pass over {@link #queue}. */
  abstract void schedule();

  void start(SimCall call, int w, long gpus, boolean preemptible) {
    SimWorker worker = workers.get(w);
    if ((worker.freeMask & gpus) != gpus) {
      throw new IllegalStateException(call.id + ": GPUs " + Long.toBinaryString(gpus)
          + " are not free on " + worker.id);
    }
    queue.remove(call.id);
    worker.freeMask &= ~gpus;
    worker.version++;
    held(Long.bitCount(gpus));
    worker.freeCpus -= call.cpus;
    worker.freeMemory -= call.memory;
    long local = 0;
    for (Map.Entry<String, Long> input : call.inputs.entrySet()) {
      if (worker.held.containsKey(input.getKey())) {
        local += input.getValue();
      }
      worker.held.put(input.getKey(), input.getValue());
    }
    call.localInputBytes = local;
    call.startMillis = des.now();
    if (call.firstStartMillis < 0) {
      call.firstStartMillis = des.now();
    }
    List<Integer> ids = new ArrayList<>();
    for (long m = gpus; m != 0; m &= m - 1) {
      ids.add(Long.numberOfTrailingZeros(m));
    }
    call.gpuIds = ids.stream().mapToInt(i -> i).toArray();
    call.closeGpus = call.gpus < 2
        || SimWorker.maxDistance(worker.topology, gpus) <= bestDistance[call.gpus];
    call.startOverhead = startCost.seconds(call, worker.id, call.gpuIds);
    call.overheadSeconds += call.startOverhead;
    running.put(call.id, new Running(call, w, gpus, preemptible));
    int epoch = ++call.epoch;
    des.after(call.startOverhead + call.remaining, () -> finish(call, epoch));
  }

  private void finish(SimCall call, int epoch) {
    Running run = running.get(call.id);
    if (run == null || call.epoch != epoch) {
      return;
    }
    release(run);
    busyGpuSeconds += call.gpus * call.remaining;
    call.remaining = 0;
    call.endMillis = des.now();
    onDone.accept(call);
    requestPass();
  }

  void release(Running run) {
    running.remove(run.call.id);
    SimWorker worker = workers.get(run.worker);
    worker.freeMask |= run.gpus;
    worker.version++;
    held(-Long.bitCount(run.gpus));
    worker.freeCpus += run.call.cpus;
    worker.freeMemory += run.call.memory;
    released(run);
  }

  private void held(long change) {
    heldIntegral += heldGpus * (des.now() - heldSince) / 1000.0;
    heldSince = des.now();
    heldGpus += change;
  }

  /** GPU-seconds held by calls from the start until now. */
  double heldGpuSeconds() {
    return heldIntegral + heldGpus * (des.now() - heldSince) / 1000.0;
  }

  /** Hook for drivers that mirror worker state elsewhere. */
  void released(Running run) {}

  /** Stops a running call now; its checkpointed progress is kept and it is queued again. */
  void preempt(Running run) {
    if (running.get(run.call.id) != run) {
      return;
    }
    SimCall call = run.call;
    double ran = ran(call);
    double saved = call.checkpointEvery > 0
        ? Math.floor(Math.min(ran, call.remaining) / call.checkpointEvery) * call.checkpointEvery
        : 0;
    release(run);
    busyGpuSeconds += call.gpus * ran;
    call.lostGpuSeconds += call.gpus * (ran - saved);
    call.remaining -= saved;
    call.preemptions++;
    call.epoch++;
    queue.put(call.id, call);
    requestPass();
    armTimer();
  }

  /** Unsaved seconds of a running call: since its start or its last checkpoint. */
  double unsaved(Running run) {
    double ran = ran(run.call);
    return run.call.checkpointEvery > 0 ? ran % run.call.checkpointEvery : ran;
  }

  /** Seconds of work a running call did since its latest start, its start cost not counted. */
  private double ran(SimCall call) {
    return Math.max(0, (des.now() - call.startMillis) / 1000.0 - call.startOverhead);
  }
}
