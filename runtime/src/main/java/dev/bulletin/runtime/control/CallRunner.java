package dev.bulletin.runtime.control;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.protocol.FailureCode;
import dev.bulletin.runtime.api.TaskEvents;
import dev.bulletin.runtime.objects.ObjectDirectory;
import dev.bulletin.runtime.objects.TaskObjects;
import dev.bulletin.runtime.scheduler.plan.Placement;
import dev.bulletin.runtime.task.StopReason;
import dev.bulletin.runtime.task.Task;
import dev.bulletin.runtime.task.TaskState;
import dev.bulletin.runtime.task.TaskTable;
import dev.bulletin.runtime.workers.AttachedWorker;
import dev.bulletin.worker.CallListener;
import dev.bulletin.worker.CallOutcome;
import dev.bulletin.worker.CallRequest;
import io.vertx.core.Context;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.function.BiConsumer;
import java.util.function.Function;

/**
 * Runs placed calls on their workers and handles how they end: reserves a placement's slots,
 * brings inputs kept elsewhere to the store, sends the call once the journal holds its attempt,
 * watches its walltime, and turns its outcome into a requeue or its final event, giving the
 * slots back. Kept apart from {@link ControlPlane}, which decides what runs where and when to
 * stop it; runs on the plane's event loop.
 */
final class CallRunner {

  private final Context context;
  private final JournaledDispatch dispatches;
  private final TaskTable tasks;
  private final ObjectDirectory objects;
  private final PolicyPass policy;
  private final CallEndings endings;
  /** The Unix account each user's executors run as (users[].run_as), for those that name one. */
  private final Map<String, String> runAs;
  /** The attached worker with this id (null if none). */
  private final Function<String, AttachedWorker> workers;
  /** The plane's stop, for a call whose walltime has passed. */
  private final BiConsumer<Task, StopReason> stop;
  /** Asks for a scheduling pass: an ended call frees slots or goes back to the queue. */
  private final Runnable schedule;
  /** Where each placed or running call runs; its slots go back to that worker when it ends. */
  private final PlacedCalls placements = new PlacedCalls();
  private final Map<String, Long> timeoutTimers = new HashMap<>();
  private int runningCount;

  CallRunner(Context context, Journaling journaling, TaskTable tasks, ObjectDirectory objects,
      PolicyPass policy, CallEndings endings, Map<String, String> runAs,
      Function<String, AttachedWorker> workers, BiConsumer<Task, StopReason> stop,
      Runnable schedule) {
    this.context = context;
    this.dispatches = new JournaledDispatch(journaling, context);
    this.tasks = tasks;
    this.objects = objects;
    this.policy = policy;
    this.endings = endings;
    this.runAs = Map.copyOf(runAs);
    this.workers = workers;
    this.stop = stop;
    this.schedule = schedule;
  }

  int runningCount() {
    return runningCount;
  }

  Set<String> placedTaskIds() {
    return placements.ids();
  }

  /** The tasks placed or running, in a list of their own (a pass reads every one). */
  List<Task> placedTasks() {
    return placements.tasks();
  }

  Optional<AttachedWorker> placementOf(String taskId) {
    return Optional.ofNullable(placements.worker(taskId));
  }

  // ---- starting --------------------------------------------------------------------------

  /**
   * Reserves the placement's slots and starts the call on them; {@link #unplace} gives them
   * back. Inputs kept on another worker come to the runtime's store first (the call waits,
   * placed, for them); on the worker that kept them they do not move.
   *
   * @throws IllegalStateException if the slots are not free (the plan was wrong)
   */
  void dispatch(Task task, Placement placed) {
    AttachedWorker worker = workers.apply(placed.workerId());
    worker.reserve(task.id(), task.demand(), placed.gpuIds());
    worker.residentGpus().taken(placed.gpuIds(), task.args().namespace());
    placements.put(task, worker);
    task.placedOn(placed.workerId(), placed.gpuIds(), System.nanoTime());
    task.usage().reserved(placed.workerId(), System.nanoTime());
    tasks.transitionQuietly(task, TaskState.PLACED);
    // Resident values another worker spilled come with it, as inputs (issue 29).
    String namespace = task.args().namespace();
    var residents = objects.residents().forCall(namespace, task.residentHandles(), worker.id(),
        objects.residents().preferredFor(namespace, task.residentHandles(),
            task.residentMadeOn()));
    task.restoring(residents.restore(), residents.lost());
    List<ObjectKey> moves = objects.toMoveFor(worker.remote() ? worker.id() : null,
        inputsOf(task));
    if (moves.isEmpty()) {
      run(task, worker, placed);
      return;
    }
    objects.toHead(moves).onComplete(pulled -> {
      if (task.state() != TaskState.PLACED || placements.worker(task.id()) != worker) {
        return; // its worker went away meanwhile: the call was requeued or ended
      }
      if (task.stopReason() != null) {
        onEnded(task, new CallOutcome.Stopped(task.stopReason().describe()));
      } else if (pulled.failed()) {
        // Not retried: running it again cannot bring the input back.
        boolean lost = pulled.cause() instanceof ObjectDirectory.ObjectLostException;
        unplace(task);
        TaskObjects.release(objects, task);
        tasks.transition(task, TaskState.ERROR, TaskEvents.failed(task.id(),
            lost ? FailureCode.WORKER_LOST : FailureCode.INTERNAL, task.name()
                + "() could not start: " + pulled.cause().getMessage()
                + (lost ? "; run the call that made it again" : ""), CallEndings.timings(task, 0)));
        schedule.run();
      } else {
        run(task, worker, placed);
      }
    });
  }

  /** Starts the call on its worker once the journal holds its new attempt. */
  private void run(Task task, AttachedWorker worker, Placement placed) {
    dispatches.dispatch(task, worker.id(), worker.remote(), () -> {
      if (task.state() != TaskState.PLACED || placements.worker(task.id()) != worker) {
        return; // its worker went away meanwhile: the call was requeued or ended
      }
      if (task.stopReason() != null) {
        onEnded(task, new CallOutcome.Stopped(task.stopReason().describe()));
      } else {
        send(task, worker, placed);
      }
    });
  }

  /** The objects the call reads: its refs, and the spills it restores from other workers. */
  private static List<ObjectKey> inputsOf(Task task) {
    List<ObjectKey> inputs = new ArrayList<>(task.refs());
    task.restoring().values().stream().distinct().filter(key -> !inputs.contains(key))
        .forEach(inputs::add);
    return inputs;
  }

  private void send(Task task, AttachedWorker worker, Placement placed) {
    CallRequest request = new CallRequest(task.id(), task.function(), task.args(),
        inputsOf(task), placed.gpuIds(), Optional.ofNullable(runAs.get(task.owner().user())),
        task.executorSpec().withGpuFraction(task.demand().fractional()
            ? task.demand().gpuShare() : 0),
        task.sink().sessionId(), task.restoring(),
        task.residentLost());
    task.sink().sentTo(worker.id());
    whenEnded(task, worker.link().run(request, listener(task)));
  }

  /**
   * Takes over a restored call its remote worker still runs (see {@link RestoredRemoteWork}):
   * its GPUs there are reserved again ({@code gpuIds} null: the worker ended it already and its
   * end follows, nothing to reserve), and its outcome is this runtime's to report.
   *
   * @throws IllegalStateException if those slots are not free on the worker
   */
  void adopt(Task task, AttachedWorker worker, List<Integer> gpuIds) {
    if (gpuIds != null) {
      worker.reserve(task.id(), task.demand(), gpuIds);
    }
    long now = System.nanoTime();
    placements.put(task, worker);
    task.placedOn(worker.id(), gpuIds == null ? List.of() : gpuIds, now);
    task.usage().reserved(worker.id(), now);
    task.usage().running(now);
    task.adoptedRunning(now);
    runningCount++;
    tasks.transitionQuietly(task, TaskState.RUNNING); // the journal has it there; so did its client
    startWalltime(task);
    whenEnded(task, worker.link().adopt(task.id(), task.args().namespace(), listener(task)));
  }

  // ---- running and ending ---------------------------------------------------------------

  private CallListener listener(Task task) {
    return new CallListener() {
      @Override
      public void started(String executorId) {
        context.runOnContext(ignored -> onStarted(task));
      }

      @Override
      public void output(boolean stderr, byte[] data) {
        context.runOnContext(ignored -> {
          if (task.state() == TaskState.RUNNING) {
            tasks.announce(task, TaskEvents.output(task.id(), stderr, data));
          }
        });
      }
    };
  }

  private void whenEnded(Task task, CompletableFuture<CallOutcome> ended) {
    ended.whenComplete((outcome, error) -> context.runOnContext(ignored -> onEnded(task,
        error == null ? outcome : new CallOutcome.ExecutorDied("worker agent failed: " + error))));
  }

  private void onStarted(Task task) {
    if (task.state() != TaskState.PLACED) {
      return;
    }
    task.startedAt(System.nanoTime());
    task.usage().running(System.nanoTime());
    runningCount++;
    AttachedWorker worker = placements.worker(task.id());
    if (!task.restoring().isEmpty()) { // their values live on the call's worker now
      objects.residents().restoredOn(task.args().namespace(), task.restoring().values(),
          task.workerId(), task.id());
    }
    tasks.transition(task, TaskState.RUNNING, TaskEvents.running(task.id(), task.workerId(),
        task.gpuIds(), worker != null && worker.slots().simulatedGpus()));
    startWalltime(task);
  }

  /** Stops the call when its timeout (or its QoS class's walltime) has passed. */
  private void startWalltime(Task task) {
    long millis = Math.max(1, task.walltime().toMillis());
    timeoutTimers.put(task.id(), context.owner().setTimer(millis, id -> stop.accept(task,
        new StopReason.TimedOut(limitOf(task)))));
  }

  /** The limit a call ran past, in words: made when it did, not for every call that starts. */
  private static String limitOf(Task task) {
    return task.timeoutSeconds() > 0 ? "timeout of " + task.timeoutSeconds() + " s"
        : "walltime of " + task.walltime().toString().substring(2).toLowerCase(java.util.Locale.ROOT)
            + " (the longest its qos " + task.qos() + " allows)";
  }

  private void onEnded(Task task, CallOutcome outcome) {
    Long timer = timeoutTimers.remove(task.id());
    if (timer != null) {
      context.owner().cancelTimer(timer);
    }
    if (outcome instanceof CallOutcome.Returned returned && placements.worker(task.id()) != null) {
      placements.worker(task.id()).residentGpus().callEnded(task.gpuIds(), task.args().namespace(),
          task.sink().sessionId(),
          returned.residentBytes());
    }
    if (outcome instanceof CallOutcome.Returned returned && returned.leasedCalls() >= 0) {
      task.usage().leased(returned.leasedCalls());
    }
    unplace(task);
    if (task.startedAt() != null) {
      java.time.Instant now = policy.now();
      policy.ledger().charge(task.owner().user(), task.owner().group(), task.demand().gpuShare(),
          java.time.Duration.between(task.startedAt(), now).toMillis() / 1000.0, now);
    }
    boolean died = outcome instanceof CallOutcome.WorkerLost
        || outcome instanceof CallOutcome.ExecutorDied;
    if (outcome instanceof CallOutcome.Undelivered && task.stopReason() == null) {
      // It never reached the worker (gone as the call was sent): it costs no retry.
      task.undelivered();
      tasks.transition(task, TaskState.QUEUED, TaskEvents.queued(task.id()));
    } else if (task.preemptedFor() != null && task.stopReason() == null
        && !(outcome instanceof CallOutcome.Returned)) {
      // Preempted: back in the queue where it was. The count goes with the QUEUED event
      // itself: a victim that runs again at once is never told a wait by the passes.
      task.requeued();
      tasks.transition(task, TaskState.QUEUED, TaskEvents.preempted(task.id(), task.preemptions()));
    } else if (died && task.stopReason() == null && task.retriesLeft() > 0) {
      // The call never finished anywhere: it runs again, with the objects it still holds.
      task.requeued();
      tasks.transition(task, TaskState.QUEUED, TaskEvents.queued(task.id()));
    } else {
      TaskObjects.release(objects, task);
      endings.finish(task, outcome);
    }
    schedule.run();
  }

  /** Gives the call's slots back to the worker {@link #dispatch} reserved them on. */
  private void unplace(Task task) {
    if (task.state() == TaskState.RUNNING) {
      runningCount--;
    }
    AttachedWorker worker = placements.remove(task.id());
    objects.residents().placementEnded(new dev.bulletin.runtime.objects.ResidentDirectory
        .ForCall(task.restoring(), task.residentLost()));
    task.restoring(Map.of(), Map.of());
    if (worker != null) {
      task.usage().released(task.demand().gpuShare(),
          worker.link().usage().takeBusyGpuSeconds(task.id()), System.nanoTime());
      worker.release(task.id());
    }
  }
}
