package dev.bulletin.worker.impl;

import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.worker.WorkerOptions;
import dev.bulletin.worker.WorkerStatusView;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * The executors of one agent. Executors are keyed by the GPUs they are pinned to
 * (CUDA_VISIBLE_DEVICES is fixed at process start): one warm executor per GPU and a few CPU
 * executors are started up front; an executor goes back to the idle set when its call ends,
 * and one that must not run another call (dead, stopped, damaged by its call, at its call
 * limit) is retired and, when it held a warm slot, replaced in the background.
 */
final class ExecutorPool {

  private static final Logger LOG = Logger.getLogger(ExecutorPool.class.getName());
  static final List<Integer> CPU_ONLY = List.of();

  private final WorkerOptions options;
  private final ObjectStore store;
  private final ExecutorService threads;
  /** Idle executors by GPU set; guarded by {@code this}. */
  private final Map<List<Integer>, Deque<ExecutorProcess>> idle = new HashMap<>();
  /** Executors being started in the background, by GPU set. */
  private final Map<List<Integer>, CompletableFuture<Void>> warming = new ConcurrentHashMap<>();
  private final AtomicInteger sequence = new AtomicInteger();
  private final AtomicInteger live = new AtomicInteger();
  private final AtomicInteger liveCpu = new AtomicInteger();
  private final AtomicLong launches = new AtomicLong();
  private volatile boolean closed;

  ExecutorPool(WorkerOptions options, ObjectStore store, ExecutorService threads) {
    this.options = options;
    this.store = store;
    this.threads = threads;
  }

  /** Starts the warm executors; completes when they are ready. */
  CompletableFuture<Void> start() {
    List<CompletableFuture<Void>> started = new ArrayList<>();
    for (int gpu = 0; gpu < options.gpus().count(); gpu++) {
      started.add(warmUp(List.of(gpu)));
    }
    for (int i = 0; i < Math.min(options.warmCpuExecutors(), options.cpus()); i++) {
      started.add(warmUp(CPU_ONLY));
    }
    return CompletableFuture.allOf(started.toArray(CompletableFuture[]::new));
  }

  /** An executor for a call on these GPUs: an idle one, else a new one. */
  ExecutorProcess take(List<Integer> gpuIds) throws ExecutorStartException {
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
          forget(candidate, true);
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

  /**
   * Retires an executor that could not load a call, and starts a fresh one (it has run nothing)
   * for that call in its place: not an idle one, which an earlier call may have damaged too.
   */
  ExecutorProcess replaceUnfit(ExecutorProcess unfit, String reason)
      throws ExecutorStartException {
    stop(unfit, reason);
    forget(unfit, false);
    return launch(unfit.gpuIds());
  }

  /**
   * Takes back an executor whose call ended: idle for the next call, or retired when it must
   * not run another one.
   */
  void giveBack(ExecutorProcess executor) {
    String retire = !executor.isAlive() ? "it exited"
        : executor.retireReason() != null ? executor.retireReason()
        : options.executorMaxCalls() > 0 && executor.calls() >= options.executorMaxCalls()
            ? "it ran its " + options.executorMaxCalls() + " calls (--executor-max-calls)"
        : null;
    if (retire != null || closed) {
      retire(executor, closed ? "the worker is closing" : retire);
      return;
    }
    synchronized (this) {
      idle.computeIfAbsent(executor.gpuIds(), key -> new ArrayDeque<>()).push(executor);
    }
  }

  /** Stops an executor (if it still runs), forgets it, and replaces it if it was a warm one. */
  void retire(ExecutorProcess executor, String reason) {
    stop(executor, reason);
    forget(executor, true);
  }

  private void stop(ExecutorProcess executor, String reason) {
    if (executor.isAlive()) {
      LOG.log(executor.retireReason() != null ? Level.INFO : Level.FINE,
          "retiring executor " + executor.id() + ": " + reason);
      threads.execute(executor::shutdown); // waits up to 2 s for the process to exit
    }
  }

  WorkerStatusView status() {
    int idleCount;
    synchronized (this) {
      idleCount = idle.values().stream().mapToInt(Deque::size).sum();
    }
    return new WorkerStatusView(live.get(), idleCount, launches.get());
  }

  /** Stops the idle executors; those still running calls are the caller's to stop. */
  void close() {
    closed = true;
    List<ExecutorProcess> all = new ArrayList<>();
    synchronized (this) {
      idle.values().forEach(all::addAll);
      idle.clear();
    }
    all.forEach(ExecutorProcess::shutdown);
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

  /** Counts an executor out and, if asked, starts a replacement when it held a warm slot. */
  private void forget(ExecutorProcess executor, boolean replace) {
    live.decrementAndGet();
    if (executor.gpuIds().isEmpty()) {
      liveCpu.decrementAndGet();
    }
    if (closed || !replace) {
      return;
    }
    if (executor.gpuIds().size() == 1) {
      warmUp(executor.gpuIds());
    } else if (executor.gpuIds().isEmpty()) {
      keepCpuSpare();
    }
  }
}
