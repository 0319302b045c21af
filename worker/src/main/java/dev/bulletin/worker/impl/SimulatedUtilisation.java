package dev.bulletin.worker.impl;

import java.time.Duration;
import java.util.Collection;
import java.util.HashMap;
import java.util.Map;
import java.util.Optional;

/**
 * Simulated GPUs (--simulate-gpus): a GPU is as busy as the executor of the call holding it
 * keeps a CPU busy, its process's CPU time over the time since its previous sample (capped at
 * 1). So a call that computes shows busy, one that waits in {@code time.sleep} or on I/O shows
 * idle: the distinction NVML's counter makes for kernels, here for the CPU, so the whole
 * ledger path runs on machines without GPUs.
 */
final class SimulatedUtilisation implements UtilisationSource {
  private record Baseline(long cpuNanos, long atNanos) {}

  /** Per executor process: its CPU time at its previous sample. */
  private final Map<Long, Baseline> baselines = new HashMap<>();

  @Override
  public void begin(Holder holder) {
    if (holder.pid() > 0) {
      baselines.put(holder.pid(), new Baseline(cpuNanos(holder.pid()), System.nanoTime()));
    }
  }

  @Override
  public Map<Integer, Double> sample(Collection<Holder> holders) {
    Map<Integer, Double> utilisation = new HashMap<>();
    for (Holder holder : holders) {
      if (holder.pid() <= 0 || holder.gpuIds().isEmpty()) {
        continue;
      }
      Baseline now = new Baseline(cpuNanos(holder.pid()), System.nanoTime());
      Baseline before = baselines.put(holder.pid(), now);
      double share = 0;
      if (before != null && now.atNanos() > before.atNanos()) {
        share = (double) (now.cpuNanos() - before.cpuNanos()) / (now.atNanos() - before.atNanos());
      }
      for (int gpu : holder.gpuIds()) {
        utilisation.put(gpu, Math.min(1, Math.max(0, share)));
      }
    }
    baselines.keySet().removeIf(pid -> ProcessHandle.of(pid).isEmpty());
    return utilisation;
  }

  static long cpuNanos(long pid) {
    Optional<Duration> cpu = ProcessHandle.of(pid).flatMap(p -> p.info().totalCpuDuration());
    return cpu.map(Duration::toNanos).orElse(0L);
  }

  @Override
  public String name() {
    return "simulated: executor CPU share";
  }
}
