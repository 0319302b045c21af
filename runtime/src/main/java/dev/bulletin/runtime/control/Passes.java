package dev.bulletin.runtime.control;

import dev.bulletin.runtime.api.TaskEvents;
import dev.bulletin.runtime.workers.AttachedWorker;
import dev.bulletin.runtime.scheduler.plan.Placement;
import dev.bulletin.runtime.scheduler.plan.Plan;
import dev.bulletin.runtime.scheduler.plan.Preemption;
import dev.bulletin.runtime.scheduler.plan.Rejection;
import dev.bulletin.runtime.scheduler.plan.WaitCode;
import dev.bulletin.runtime.scheduler.plan.WaitInfo;
import dev.bulletin.runtime.task.Task;
import dev.bulletin.runtime.task.TaskState;
import io.vertx.core.Context;
import java.util.Collection;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * Runs the policy scheduler's passes for the control plane and applies their plans: starts the
 * placements, signals preemption victims, fails refusals and tells waiting callers why. Owns
 * when passes run (at once when quiet, coalesced under load) and which calls one considers.
 * Runs on the control plane's event loop.
 */
final class Passes {

  /** A queue this short is always scheduled at once (no coalescing delay). */
  private static final int SHORT_QUEUE = 64;
  /**
   * A pass considers each user's first this many queued calls, plus every call that goes ahead
   * (credits, or a QoS class above the default; see TaskTable#window). A pass costs a few
   * microseconds per call it considers, and a user with thousands queued (a big map) only ever
   * starts the first few; the rest come into view as those go.
   */
  static final int WINDOW_PER_USER = 32;
  /**
   * How often the full window runs at the least while passes look at a small one
   * ({@link SmallWindow}): the calls behind the first few get their positions and explanations
   * from it (a timer's pass is always full, so a call is still explained when it turns old
   * enough).
   */
  private static final long FULL_WINDOW_EVERY_NANOS = 200_000_000L;
  /**
   * A full window due by time alone waits until it would take at most this share of the loop:
   * fifty times its last run. Over 2,000 users' queues (make bench-scale, 1,000 simulated
   * workers, 100,000 calls) a full pass takes 70-190 ms and tells up to 64,000 calls their
   * positions, which {@link WaitNotices} passes on at most once a second near the head and every
   * position / 1,000 seconds further back. At twenty times its run the full passes were still
   * about 40 % of what passes cost there (one every 2 s). Small clusters keep one every 200 ms.
   * The 5 s tick's pass ({@link #tick}) follows the same rule; the pass a plan asks for
   * ({@link #revisitAt}: a call turning old enough to be explained, a reclaim due) is full
   * whenever it comes.
   */
  private static final int FULL_WINDOW_SHARE_INVERSE = 50;

  /** Codes of a call that a worker the pools start could take. */
  private static final Set<WaitCode> WAITS_FOR_A_WORKER = EnumSet.of(
      WaitCode.CAPACITY, WaitCode.NO_WORKERS, WaitCode.WORKER_EXPIRY);

  private final ControlPlane plane;
  private final RefillWindow windows;
  private final PolicyPass policy;
  private final Context context;
  private boolean passRunning;
  private boolean passWanted;
  private boolean passDeferred;
  private long lastPassEndNanos;
  /** How long the last run of passes took: the pause that must follow it under load. */
  private long lastPassNanos;
  /** Told each run's duration (metrics); nothing by default. */
  private java.util.function.LongConsumer observer = nanos -> { };
  /** The one-shot timer of the pass a plan asked for (Plan#revisitAt), or -1; and its moment. */
  private long revisitTimer = -1;
  private long revisitAtMillis = Long.MAX_VALUE;
  /** A pass over the full window is due (a timer asked, or the small one may not suffice). */
  private boolean fullWanted = true;
  private long lastFullNanos;
  /** How long the last full window's pass took (its plan and applying it). */
  private long lastFullPassNanos;
  /**
   * How many of each user's calls the next pass looks at when that is more than its window's
   * usual size: doubled each time a pass placed (or refused) every call it looked at, back to
   * 0 when one left calls waiting. A window of a fixed size placed at most that many calls per
   * pass however many slots were free (make bench-scale, QoS batch, 1,000 simulated workers:
   * 4 calls per pass over every worker); one that grows stays small where little fits (a user
   * at their QoS cap), and is cut at {@link #MAX_REACH} so that one pass stays short.
   */
  private int reach;
  static final int MAX_REACH = 1024;

  Passes(ControlPlane plane, PolicyPass policy, Context context) {
    this.plane = plane;
    this.policy = policy;
    this.context = context;
    this.windows = new RefillWindow(plane.tasks(), policy.policy());
  }

  void observe(java.util.function.LongConsumer observer) {
    this.observer = observer;
  }

  /**
   * Asks for a scheduling pass. A freed slot is filled at once: the pass runs now, unless one
   * ran so recently that passes would take over half of the loop; then requests coalesce into
   * one pass, at the next turn of the loop (the endings already waiting are handled first) or,
   * after an expensive pass, once as long has passed again. (A fixed 1 ms gap here capped a
   * pipelined map at about two calls per millisecond.)
   */
  void request() {
    request(true);
  }

  /**
   * Asks for a pass at the next turn of the loop, for a call's end: the ends that arrived with
   * it (a worker's stream delivers several at once under load, and the local agent hands each
   * over as a task) are handled first and share one pass, where each ran a pass of its own
   * (make bench-scale: 10 workers 202 -> 183-192 µs of runtime CPU per call, 1,000 workers
   * 254-278 -> 219-238). A submit's pass still runs at once: deferring it too put a loop turn,
   * the Submit's reply written, between a lone sync call and its placement (+80 µs p50).
   */
  void requestSoon() {
    request(false);
  }

  private void request(boolean mayRunNow) {
    passWanted = true;
    if (passRunning || passDeferred) {
      return;
    }
    long since = System.nanoTime() - lastPassEndNanos;
    boolean cheap = since >= lastPassNanos || plane.tasks().queuedView().size() <= SHORT_QUEUE;
    if (cheap && mayRunNow) {
      runPasses();
      return;
    }
    passDeferred = true;
    long waitMillis = cheap ? 0 : (lastPassNanos - since) / 1_000_000;
    if (waitMillis == 0) {
      context.runOnContext(ignored -> runDeferred());
    } else {
      context.owner().setTimer(waitMillis, id -> runDeferred());
    }
  }

  /** Asks for a pass over every user's full window (timers: explanations and time's effects). */
  void requestFull() {
    fullWanted = true;
    request();
  }

  private void runDeferred() {
    passDeferred = false;
    runPasses();
  }

  private void runPasses() {
    passRunning = true;
    long start = System.nanoTime();
    try {
      while (passWanted) {
        passWanted = false;
        pass();
      }
    } finally {
      passRunning = false;
      lastPassEndNanos = System.nanoTime();
      lastPassNanos = lastPassEndNanos - start;
      observer.accept(lastPassNanos);
    }
  }

  /** One pass of the policy scheduler, applied in the order the plan asks. */
  private void pass() {
    Collection<Task> queue = plane.tasks().queuedView();
    if (queue.isEmpty()) {
      return;
    }
    if (plane.workers().isEmpty()) {
      tellNoWorkers(plane.tasks().window(WINDOW_PER_USER));
      return;
    }
    long now = System.nanoTime();
    int perUser = Math.max(WINDOW_PER_USER, reach);
    int smallSize = Math.max(SmallWindow.PER_USER, reach);
    long fullEvery = Math.max(FULL_WINDOW_EVERY_NANOS,
        FULL_WINDOW_SHARE_INVERSE * lastFullPassNanos);
    boolean full = fullWanted || now - lastFullNanos >= fullEvery;
    RefillWindow.Choice choice = windows.choose(full, perUser, smallSize, plane::placedTasks);
    List<Task> considered = choice.considered();
    if (full) {
      fullWanted = false;
      lastFullNanos = now;
    }
    if (considered.isEmpty()) {
      return; // every user who waits is at their cap: an end or the full window comes next
    }
    List<Task> active = choice.active();
    // A pass that left calls out tells no waiting call (its positions are not the queue's), so
    // it asks for no explanations.
    Plan plan = policy.plan(plane.workers(), active, considered, plane.objects(),
        !choice.leftOut());
    if (plan.placements().size() + plan.infeasible().size() >= considered.size()
        && choice.behind() > 0) {
      passWanted = true; // the window ran out: the calls behind it may fit too
      reach = Math.min(MAX_REACH, 2 * (choice.whole() || choice.leftOut() ? perUser : smallSize));
    } else {
      reach = 0;
    }
    for (Placement placement : plan.placements()) {
      Task task = plane.tasks().get(placement.callId()).orElse(null);
      AttachedWorker worker = plane.worker(placement.workerId()).orElse(null);
      if (task == null || worker == null || task.state() != TaskState.QUEUED) {
        continue;
      }
      task.placedPreemptible(placement.preemptible());
      plane.dispatch(task, placement);
      if (placement.creditsCharged() > 0) {
        policy.ledger().spend(task.owner().group(), placement.creditsCharged(), policy.now());
        task.usage().spent(placement.creditsCharged());
      }
    }
    for (Preemption preemption : plan.preemptions()) {
      plane.tasks().get(preemption.victimId()).ifPresent(victim -> preempt(victim, preemption));
    }
    for (Rejection rejection : plan.infeasible()) {
      plane.tasks().get(rejection.callId()).ifPresent(task -> refuse(task, rejection.reason()));
    }
    for (Plan.Waiting waiting : plan.waiting()) { // none when calls were left out
      plane.tasks().get(waiting.callId()).ifPresent(task -> tellWaiting(task, waiting.info()));
    }
    plan.revisitAt().ifPresent(this::revisitAt);
    if (full) {
      lastFullPassNanos = System.nanoTime() - now;
    }
  }

  /**
   * Runs a pass at the moment a plan named (a call waiting long enough to be explained, a reclaim
   * due): the 5 s timer would leave a waiting call unexplained, or an entitled call waiting for
   * its GPUs, for seconds. One timer at a time, moved earlier when a plan asks an earlier moment;
   * a pass that runs in between for another reason simply asks again.
   */
  private void revisitAt(java.time.Instant at) {
    long atMillis = at.toEpochMilli();
    if (revisitTimer >= 0 && revisitAtMillis <= atMillis) {
      return;
    }
    if (revisitTimer >= 0) {
      context.owner().cancelTimer(revisitTimer);
    }
    long delay = Math.max(1, atMillis - policy.now().toEpochMilli());
    revisitAtMillis = atMillis;
    revisitTimer = context.owner().setTimer(delay, id -> {
      revisitTimer = -1;
      revisitAtMillis = Long.MAX_VALUE;
      requestFull();
    });
  }

  /**
   * Time passing: groups under quota earn credits for the GPUs they did not hold, and a pass runs
   * (fair share changes with time alone). It is full when the full window is due anyway
   * ({@link #FULL_WINDOW_SHARE_INVERSE}), which on a small cluster is every tick; a moment a
   * plan named (an explanation, a reclaim's patience) has a pass of its own ({@link
   * #revisitAt}). Forcing the full window every tick made 9 of the 19 full passes of a
   * 1,000-worker bench-scale run (2,000 users, 184 ms each): 3.3-3.7 s of passes over its
   * full windows, against 1.3-1.5 s without.
   */
  void tick(java.time.Duration elapsed) {
    Map<String, Double> held = new HashMap<>();
    for (String id : plane.placedTaskIds()) {
      plane.tasks().get(id).filter(task -> !task.preemptible())
          .ifPresent(task -> held.merge(task.owner().group(), task.demand().gpuShare(),
              Double::sum));
    }
    policy.ledger().earn(held, elapsed, policy.now()).forEach(plane::creditsEarned);
    request();
  }

  /**
   * A call the policy will never run as asked. One that fits no open worker only waits: it was
   * accepted, so a worker that fits it was attached (or a pool could start one) at its submit,
   * and workers come and go (a restart, a link lost and its grace run out, a Slurm job ended);
   * failing it the moment the last such worker left would turn a worker's restart into
   * users' errors. "Never" at submit stays at submit ({@link ControlPlane#feasibility}), but
   * for a call accepted while a restarted runtime's workers were reattaching: it fails once
   * they may no longer come, if none that can run it came.
   */
  private void refuse(Task task, String reason) {
    if (task.state() != TaskState.QUEUED) {
      return;
    }
    if (plane.feasibility(task.demand()).feasible()) {
      task.fits();
    }
    if (!plane.feasibilityOnOpenWorkers(task.demand()).feasible()
        && (task.fitted() || plane.restoredRemoteWork().workersMayReattach())) {
      // Where a pool could start one, what the pool does says more than what is attached.
      String why = plane.poolOutlook().forDemand(task.demand()).isPresent()
          ? "no worker attached now can run it"
          : "no worker attached now can run it (" + reason + "); it waits for a worker that can"
              + " to join";
      tellWaiting(task, new WaitInfo(1, WaitCode.NO_WORKERS, why, Optional.empty(), List.of()));
      return;
    }
    plane.failInfeasible(task, reason);
  }

  /** With no worker attached there is nothing to plan: the calls learn only what pools do. */
  private void tellNoWorkers(List<Task> window) {
    int position = 0;
    for (Task task : window) {
      tellWaiting(task, new WaitInfo(++position, WaitCode.NO_WORKERS, "no worker is attached",
          Optional.empty(), List.of()));
    }
  }

  /**
   * Tells the caller why its call waits, when that changed ({@link WaitNotices}). A call
   * that waits for a worker also hears what the pools do about it.
   */
  private void tellWaiting(Task task, WaitInfo info) {
    if (WAITS_FOR_A_WORKER.contains(info.code())) {
      Optional<String> pools = plane.poolOutlook().forDemand(task.demand());
      if (pools.isPresent()) {
        info = new WaitInfo(info.position(), info.code(), info.reason() + "; " + pools.get(),
            info.eta(), info.suggestions());
      }
    }
    long now = System.nanoTime();
    if (!WaitNotices.due(task.waitInfo(), info, now - task.waitToldNanos())) {
      return;
    }
    task.toldWaiting(info, now);
    plane.tasks().announce(task, TaskEvents.waiting(task.id(), info, task.preemptions()));
  }

  /**
   * Preempts a call to make room: its checkpoint hooks get the policy's grace, then it is
   * stopped and goes back to the queue, keeping its place, without using a retry.
   */
  private void preempt(Task victim, Preemption preemption) {
    AttachedWorker worker = plane.placementOf(victim.id()).orElse(null);
    if (worker == null || victim.preemptedFor() != null || victim.stopReason() != null) {
      return;
    }
    victim.preempting(preemption.forCallId());
    java.util.logging.Logger.getLogger(dev.bulletin.protocol.LogSetup.CALLS).info("call "
        + victim.id() + " (" + victim.name() + " of " + victim.owner().user() + ") preempted on "
        + worker.id() + " for call " + preemption.forCallId() + "; it keeps its place in the"
        + " queue");
    worker.link().preempt(victim.id(), "preempted for " + preemption.forCallId(),
        policy.policy().preemptionGrace());
  }

}
