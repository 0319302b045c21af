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
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * A worker agent whose executors are processes on this host. Executors are keyed by the GPUs
 * they are pinned to (CUDA_VISIBLE_DEVICES is fixed at process start): one warm executor per GPU
 * and a few CPU executors are started up front; an executor goes back to the idle set when its
 * call ends, and one that died or was killed is replaced in the background.
 */
public final class LocalWorkerAgent implements WorkerAgent {

  private static final Logger LOG = Logger.getLogger(LocalWorkerAgent.class.getName());
  private static final List<Integer> CPU_ONLY = List.of();

  private final WorkerOptions options;
  private final ObjectStore store;
  private final ExecutorService threads = Executors.newCachedThreadPool(runnable -> {
    Thread thread = new Thread(runnable, "bulletin-worker");
    thread.setDaemon(true);
    return thread;
  });
  /** Idle executors by GPU set; guarded by {@code this}. */
  private final Map<List<Integer>, Deque<ExecutorProcess>> idle = new HashMap<>();
  private final Map<String, ExecutorProcess> running = new ConcurrentHashMap<>();
  /** Executors being started in the background, by GPU set. */
  private final Map<List<Integer>, CompletableFuture<Void>> warming = new ConcurrentHashMap<>();
  /** Stops that arrived before the call reached an executor. */
  private final Map<String, String> pendingStops = new ConcurrentHashMap<>();
  private final AtomicInteger sequence = new AtomicInteger();
  private final AtomicInteger live = new AtomicInteger();
  private final AtomicInteger liveCpu = new AtomicInteger();
  private final AtomicLong launches = new AtomicLong();
  private volatile boolean closed;

  public LocalWorkerAgent(WorkerOptions options, ObjectStore store) {
    this.options = options;
    this.store = store;
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
    List<CompletableFuture<Void>> warming = new ArrayList<>();
    for (int gpu = 0; gpu < options.gpus().count(); gpu++) {
      warming.add(warmUp(List.of(gpu)));
    }
    for (int i = 0; i < Math.min(options.warmCpuExecutors(), options.cpus()); i++) {
      warming.add(warmUp(CPU_ONLY));
    }
    return CompletableFuture.allOf(warming.toArray(CompletableFuture[]::new));
  }

  @Override
  public CompletableFuture<CallOutcome> run(CallRequest request, CallListener listener) {
    return CompletableFuture.supplyAsync(() -> runBlocking(request, listener), threads);
  }

  @Override
  public void stop(String taskId, String reason) {
    ExecutorProcess executor = running.get(taskId);
    if (executor != null) {
      executor.kill(reason);
    } else {
      pendingStops.put(taskId, reason);
    }
  }

  @Override
  public void preempt(String taskId, String reason, java.time.Duration grace) {
    // Signalling runs kill(1) and waits for it: on the agent's threads, never the caller's
    // (the control plane's event loop).
    threads.execute(() -> {
      ExecutorProcess executor = running.get(taskId);
      if (executor == null || !executor.signalPreemption()) {
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
  public WorkerStatusView status() {
    int idleCount;
    synchronized (this) {
      idleCount = idle.values().stream().mapToInt(Deque::size).sum();
    }
    return new WorkerStatusView(live.get(), idleCount, launches.get());
  }

  @Override
  public void close() {
    closed = true;
    List<ExecutorProcess> all = new ArrayList<>(running.values());
    synchronized (this) {
      idle.values().forEach(all::addAll);
      idle.clear();
    }
    all.forEach(ExecutorProcess::shutdown);
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
      executor = take(request.gpuIds());
    } catch (ExecutorStartException e) {
      return new CallOutcome.ExecutorDied(e.getMessage());
    }
    running.put(taskId, executor);
    stopped = pendingStops.remove(taskId);
    if (stopped != null) {
      running.remove(taskId);
      giveBack(executor);
      return new CallOutcome.Stopped(stopped);
    }
    CallOutcome outcome;
    Path staged = store.folderOf(request.args().namespace()).resolve(".result-" + taskId);
    List<ObjectKey> used = new ArrayList<>(request.refs());
    used.add(request.function());
    used.add(request.args());
    try (ObjectStore.Lease lease = store.lease(used)) {
      outcome = executor.call(request, lease, staged, listener);
      if (outcome instanceof CallOutcome.Returned returned) {
        outcome = adoptResult(returned, staged, executor);
      }
    } catch (ObjectStoreException e) {
      outcome = new CallOutcome.ExecutorDied("the call's objects are not in the store: "
          + e.getMessage());
    } catch (UnfitExecutorException e) {
      outcome = new CallOutcome.ExecutorDied("executor " + executor.id()
          + " could not load the call: " + e.getMessage());
    } finally {
      running.remove(taskId);
      pendingStops.remove(taskId); // a stop that raced the call's end must not linger
      try {
        Files.deleteIfExists(staged); // a result half-written by an executor that died
      } catch (IOException ignored) {
        // The store's folder is removed when it closes.
      }
    }
    if (executor.isAlive() && !(outcome instanceof CallOutcome.Stopped)) {
      giveBack(executor);
    } else {
      retire(executor);
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

  private ExecutorProcess take(List<Integer> gpuIds) throws ExecutorStartException {
    if (gpuIds.isEmpty()) {
      keepCpuSpare();
    }
    while (true) {
      synchronized (this) {
        Deque<ExecutorProcess> candidates = idle.get(gpuIds);
        while (candidates != null && !candidates.isEmpty()) {
          ExecutorProcess candidate = candidates.poll();
          if (candidate.isAlive()) {
            return candidate;
          }
          retire(candidate);
        }
      }
      // A replacement already starting for these GPUs is the one to use: launching another
      // would leave two executors (two CUDA contexts) pinned to the same GPUs.
      CompletableFuture<Void> starting = warming.get(gpuIds);
      if (starting == null || gpuIds.isEmpty()) {
        return launch(gpuIds);
      }
      starting.exceptionally(error -> null).join();
    }
  }

  /** Keeps one CPU executor idle, so that concurrent CPU calls do not wait for a Python start. */
  private void keepCpuSpare() {
    boolean spareNeeded;
    synchronized (this) {
      Deque<ExecutorProcess> cpu = idle.get(CPU_ONLY);
      spareNeeded = (cpu == null || cpu.isEmpty()) && liveCpu.get() < options.cpus()
          && options.warmCpuExecutors() > 0;
    }
    if (spareNeeded) {
      warmUp(CPU_ONLY);
    }
  }

  private ExecutorProcess launch(List<Integer> gpuIds) throws ExecutorStartException {
    String id = options.workerId() + "-e" + sequence.incrementAndGet();
    ExecutorProcess executor = ExecutorProcess.launch(id, gpuIds, options, store);
    launches.incrementAndGet();
    live.incrementAndGet();
    if (gpuIds.isEmpty()) {
      liveCpu.incrementAndGet();
    }
    return executor;
  }

  private CompletableFuture<Void> warmUp(List<Integer> gpuIds) {
    CompletableFuture<Void> starting = CompletableFuture.runAsync(() -> {
      try {
        giveBack(launch(gpuIds));
      } catch (ExecutorStartException e) {
        LOG.log(Level.WARNING, e.getMessage());
        throw new IllegalStateException(e.getMessage(), e);
      }
    }, threads);
    warming.put(gpuIds, starting);
    starting.whenComplete((ignored, error) -> warming.remove(gpuIds, starting));
    return starting;
  }

  private void giveBack(ExecutorProcess executor) {
    if (closed) {
      retire(executor);
      executor.shutdown();
      return;
    }
    synchronized (this) {
      idle.computeIfAbsent(executor.gpuIds(), key -> new ArrayDeque<>()).push(executor);
    }
  }

  /** Forgets a dead or killed executor and starts its replacement if it was a warm one. */
  private void retire(ExecutorProcess executor) {
    live.decrementAndGet();
    if (executor.gpuIds().isEmpty()) {
      liveCpu.decrementAndGet();
    }
    if (closed) {
      return;
    }
    if (executor.gpuIds().size() == 1) {
      warmUp(executor.gpuIds());
    } else if (executor.gpuIds().isEmpty()) {
      keepCpuSpare();
    }
  }
}
