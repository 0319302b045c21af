package dev.bulletin.worker.impl;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.bridge.ObjectStoreException;
import dev.bulletin.worker.CallListener;
import dev.bulletin.worker.CallOutcome;
import dev.bulletin.worker.CallRequest;
import dev.bulletin.worker.WorkerAgent;
import dev.bulletin.worker.WorkerOptions;
import dev.bulletin.worker.WorkerStatusView;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

/**
 * A worker agent whose executors are processes on this host ({@link ExecutorPool}). It runs each
 * call on an executor of the pool that belongs to the call's user and publishes its result; an executor that could not load a
 * call after an earlier call damaged it is replaced, and the call runs on a fresh one.
 */
public final class LocalWorkerAgent implements WorkerAgent {

  /** How often GPU utilisation is sampled while calls hold GPUs. */
  static final long SAMPLE_MILLIS = 1000;

  private final WorkerOptions options;
  private final ObjectStore store;
  private final ExecutorService threads = Executors.newCachedThreadPool(runnable -> {
    Thread thread = new Thread(runnable, "bulletin-worker");
    thread.setDaemon(true);
    return thread;
  });
  private final ExecutorPool pool;
  private final UtilisationSampler sampler;
  private final Map<String, ExecutorProcess> running = new ConcurrentHashMap<>();
  /** Stops that arrived before the call reached an executor. */
  private final Map<String, String> pendingStops = new ConcurrentHashMap<>();
  private final ResidentDrops drops;
  private final ResidentHostCap residentCap;
  /** How long a stopped call's executor may take to spill its resident values first. */
  private static final long SPILL_BEFORE_STOP_SECONDS = 10;

  public LocalWorkerAgent(WorkerOptions options, ObjectStore store) {
    this.options = options;
    this.store = store;
    this.pool = new ExecutorPool(options, store, threads);
    this.sampler = UtilisationSampler.forGpus(options.gpus(), SAMPLE_MILLIS);
    this.drops = new ResidentDrops(threads, pool.spills(), this::liveOf);
    this.residentCap = new ResidentHostCap(options.resident().hostResidentBytes(), pool,
        this::live);
  }

  @Override
  public WorkerOptions options() {
    return options;
  }

  @Override
  public ObjectStore store() {
    return store;
  }

  @Override
  public CompletableFuture<Void> start() {
    return pool.start();
  }

  @Override
  public CompletableFuture<CallOutcome> run(CallRequest request, CallListener listener) {
    return CompletableFuture.supplyAsync(() -> runBlocking(request, listener), threads);
  }

  @Override
  public void stop(String taskId, String reason) {
    ExecutorProcess executor = running.get(taskId);
    if (executor != null) {
      spillThenKill(taskId, executor, reason);
    } else {
      pendingStops.put(taskId, reason);
    }
  }

  /**
   * Stops a running call's executor; one that keeps resident values (issue 29) spills them
   * first, so an interrupted cell or a preempted call loses the call, not the session's state:
   * what the cell changed in place before the stop stays changed, as in a kernel interrupted
   * locally. The spill runs beside the call (the executor answers it on another thread) and is
   * given {@link #SPILL_BEFORE_STOP_SECONDS}: code that holds the interpreter and never lets go
   * delays the stop that long, then it is killed whatever the spill did.
   */
  private void spillThenKill(String taskId, ExecutorProcess executor, String reason) {
    if (executor.keeps() == 0) {
      executor.kill(reason);
      return;
    }
    Runnable kill = () -> {
      if (running.get(taskId) == executor) {
        executor.kill(reason);
      }
    };
    // Spilling is a blocking Py4J call: on the agent's threads, never the caller's.
    threads.execute(() -> {
      CompletableFuture.delayedExecutor(SPILL_BEFORE_STOP_SECONDS, TimeUnit.SECONDS, threads)
          .execute(kill);
      pool.spills().spillFrom(executor);
      kill.run();
    });
  }

  @Override
  public void preempt(String taskId, String reason, java.time.Duration grace) {
    // Signalling runs kill(1) and waits for it: on the agent's threads, never the caller's
    // (the control plane's event loop).
    threads.execute(() -> {
      // The victim is stopped as soon as its hooks have returned (the executor says so; at once
      // when it registered none), and after the grace at the latest.
      ExecutorProcess executor = running.get(taskId);
      if (executor == null || !executor.signalPreemption(taskId, () -> {
        if (running.get(taskId) == executor) {
          spillThenKill(taskId, executor, reason);
        }
      })) {
        stop(taskId, reason);
        return;
      }
      CompletableFuture.delayedExecutor(grace.toMillis(), TimeUnit.MILLISECONDS, threads)
          .execute(() -> {
            if (running.get(taskId) == executor) {
              executor.kill(reason);
            }
          });
    });
  }

  @Override
  public void dropResident(String namespace, String session, boolean ended) {
    drops.drop(namespace, session, ended);
  }

  @Override
  public void onSpills(dev.bulletin.worker.SpillListener listener) {
    pool.spills().listen(listener);
  }

  @Override
  public void forgetSpill(ObjectKey spill, String why) {
    int gone = pool.spills().forget(spill.namespace(), spill, why);
    if (gone > 0) {
      java.util.logging.Logger.getLogger(LocalWorkerAgent.class.getName()).info(() -> "forgot "
          + gone + " spilled resident value(s) of " + spill.namespace() + " in " + spill + ": "
          + why);
    }
  }

  /** The live executors: idle in the pool, or running a call. */
  private List<ExecutorProcess> live() {
    List<ExecutorProcess> live = new ArrayList<>(pool.idleExecutors());
    running.values().stream().filter(executor -> !live.contains(executor)).forEach(live::add);
    return live;
  }

  /** The user's live executors. */
  private List<ExecutorProcess> liveOf(String owner) {
    return live().stream().filter(executor -> owner.equals(executor.owner())).toList();
  }

  @Override
  public WorkerStatusView status() {
    return pool.status();
  }

  @Override
  public dev.bulletin.worker.GpuUsage usage() {
    return sampler;
  }

  @Override
  public void close() {
    sampler.close();
    List<ExecutorProcess> busy = new ArrayList<>(running.values());
    pool.close();
    busy.forEach(ExecutorProcess::shutdown);
    threads.shutdownNow();
  }

  private CallOutcome runBlocking(CallRequest request, CallListener listener) {
    String taskId = request.taskId();
    String stopped = pendingStops.remove(taskId);
    if (stopped != null) {
      return new CallOutcome.Stopped(stopped);
    }
    ExecutorProcess executor;
    try {
      executor = pool.take(request.owner(), request.runAs(), request.gpuIds(),
          request.executor(), listener);
    } catch (ExecutorStartException e) {
      return new CallOutcome.ExecutorDied(e.getMessage());
    }
    Path staged = store.stagingFolderOf(request.owner()).resolve(".result-" + taskId);
    // What the user keeps on another executor here is spilled, so this call can restore it.
    pool.spillOthersOf(executor);
    // Spills another worker made come with the call (the runtime brought them here); this
    // agent's own spill of a handle is the newer one, should both name it.
    Map<String, ObjectKey> spilled = new java.util.HashMap<>(request.restore());
    spilled.putAll(pool.spills().of(request.owner()));
    List<ObjectKey> used = new ArrayList<>(request.refs());
    used.addAll(new java.util.HashSet<>(spilled.values()));
    used.add(request.function());
    used.add(request.args());
    CallOutcome outcome = null;
    try (ObjectStore.Lease lease = store.lease(used)) {
      try {
        outcome = runOn(executor, request, lease, staged, spilled, listener);
      } catch (UnfitExecutorException unfit) {
        // An earlier call damaged that executor; the call did not run: again, on a fresh one.
        listener.output(true, ("[bulletin] executor " + executor.id() + " could not load the"
            + " call after an earlier call (" + unfit.getMessage() + "); it was replaced and"
            + " the call runs on a fresh executor\n").getBytes(StandardCharsets.UTF_8));
        executor = pool.replaceUnfit(executor, executor.retireReason());
        outcome = runOn(executor, request, lease, staged, spilled, listener);
      }
    } catch (ObjectStoreException e) {
      outcome = new CallOutcome.ExecutorDied("the call's objects are not in the store: "
          + e.getMessage());
    } catch (ExecutorStartException e) {
      return new CallOutcome.ExecutorDied(e.getMessage());
    } catch (UnfitExecutorException e) {
      outcome = new CallOutcome.ExecutorDied("a fresh executor, " + executor.id()
          + ", could not load the call either: " + e.getMessage());
    } finally {
      sampler.end(taskId);
      running.remove(taskId);
      pendingStops.remove(taskId); // a stop that raced the call's end must not linger
      // A result half-written by an executor that died; in the user's folder: by descriptor.
      // A returned result was adopted, which took or deleted the file: nothing to look for.
      if (!(outcome instanceof CallOutcome.Returned)) {
        dev.bulletin.bridge.UserFolder.deleteTree(staged);
      }
    }
    if (outcome instanceof CallOutcome.Stopped) {
      pool.retire(executor, "its call was stopped");
    } else {
      pool.giveBack(executor);
      residentCap.enforce(executor);
    }
    return outcome;
  }

  /** Runs the call on one executor; a stop that came first ends it before it starts. */
  private CallOutcome runOn(ExecutorProcess executor, CallRequest request,
      ObjectStore.Lease lease, Path staged, Map<String, ObjectKey> spilled,
      CallListener listener) throws UnfitExecutorException {
    running.put(request.taskId(), executor);
    sampler.begin(request.taskId(), request.gpuIds(), executor.pid());
    String stopped = pendingStops.remove(request.taskId());
    if (stopped != null) {
      return new CallOutcome.Stopped(stopped);
    }
    Map<String, String> dropped = new java.util.HashMap<>(request.residentLost());
    dropped.putAll(pool.spills().droppedOf(request.owner()));
    CallOutcome outcome = executor.call(request, lease, staged, spilled, dropped, listener);
    if (outcome instanceof CallOutcome.Returned returned) {
      return adoptResult(returned, staged, executor);
    }
    return outcome;
  }

  /** The executor wrote the result file; the store publishes it with one reference. */
  private CallOutcome adoptResult(CallOutcome.Returned returned, Path staged,
      ExecutorProcess executor) {
    try {
      store.adopt(returned.result(), staged);
      return returned;
    } catch (ObjectStoreException e) {
      return new CallOutcome.ExecutorDied("executor " + executor.id()
          + " reported result " + returned.result() + " but did not store it: " + e.getMessage());
    }
  }
}
