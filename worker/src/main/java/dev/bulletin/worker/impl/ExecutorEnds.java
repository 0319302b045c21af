package dev.bulletin.worker.impl;

import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.RejectedExecutionException;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * The ends of retired executors ({@link ExecutorProcess#shutdown}: the executor, every process
 * its calls started, its cgroup and scratch), and the GPUs they are still on: nothing else
 * starts on a GPU until what was left of its last executor is gone (DESIGN.md: a GPU belongs
 * to one user's call at a time).
 */
final class ExecutorEnds {

  private static final Logger LOG = Logger.getLogger(ExecutorEnds.class.getName());
  static final CompletableFuture<Void> DONE = CompletableFuture.completedFuture(null);

  private final ExecutorService threads;
  private final ResidentSpills spills;
  /** The ends in progress, by GPU. */
  private final Map<Integer, CompletableFuture<Void>> ending = new ConcurrentHashMap<>();

  ExecutorEnds(ExecutorService threads, ResidentSpills spills) {
    this.threads = threads;
    this.spills = spills;
  }

  /** Ends an executor in the background; completes once its processes are gone. */
  CompletableFuture<Void> inBackground(ExecutorProcess executor, String reason) {
    log(executor, reason);
    CompletableFuture<Void> ended;
    try {
      ended = CompletableFuture.runAsync(() -> spillAndEnd(executor), threads);
    } catch (RejectedExecutionException closing) {
      executor.shutdown();
      return DONE;
    }
    executor.gpuIds().forEach(gpu -> ending.put(gpu, ended));
    ended.whenComplete((ignored, error) -> executor.gpuIds().forEach(gpu -> ending.remove(gpu,
        ended)));
    return ended;
  }

  /** Ends an executor on this thread. */
  void now(ExecutorProcess executor, String reason) {
    log(executor, reason);
    spillAndEnd(executor);
  }

  /**
   * What it keeps on its GPU between calls goes to the store first (issue 29): no byte of it
   * stays on the GPU, and its user's next call restores it wherever it runs.
   */
  private void spillAndEnd(ExecutorProcess executor) {
    spills.spillFrom(executor);
    executor.shutdown();
  }

  /** Waits until the executors ended in the background on these GPUs are gone. */
  void await(List<Integer> gpuIds) {
    gpuIds.stream().map(ending::get).filter(java.util.Objects::nonNull)
        .forEach(end -> end.exceptionally(error -> null).join());
  }

  private static void log(ExecutorProcess executor, String reason) {
    if (executor.isAlive()) {
      LOG.log(executor.retireReason() != null ? Level.INFO : Level.FINE,
          "retiring executor " + executor.id() + ": " + reason);
    }
  }
}
