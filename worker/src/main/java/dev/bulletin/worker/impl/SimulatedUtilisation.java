package dev.bulletin.worker.impl;

import java.time.Duration;
import java.util.Collection;
import java.util.HashMap;
import java.util.Map;
import java.util.Optional;

/**
 * Simulated GPUs (--simulate-gpus): a GPU is as busy as the executor of the call holding it
 * wants a CPU: the time its threads ran or waited, runnable, for a CPU ({@code
 * /proc/PID/task/TID/schedstat}: on-CPU plus run-queue time) over the time since its previous
 * sample, capped at 1. So a call that computes shows busy, also on a loaded machine where it
 * gets a fraction of a CPU, and one that waits in {@code time.sleep} or on I/O shows idle: the
 * distinction NVML's counter makes for kernels, here for the CPU, so the whole ledger path runs
 * on machines without GPUs. Where schedstat cannot be read, the process's CPU time counts.
 */
final class SimulatedUtilisation implements UtilisationSource {
  /** Whether this kernel keeps schedstat (CONFIG_SCHED_INFO). */
  private static final boolean SCHEDSTAT =
      java.nio.file.Files.isReadable(java.nio.file.Path.of("/proc/self/schedstat"));

  private record Baseline(long cpuNanos, long atNanos) {}

  /** Per executor process: its CPU time at its previous sample. */
  private final Map<Long, Baseline> baselines = new HashMap<>();

  @Override
  public boolean samplesAtCallEnd() {
    return true; // a call's executor's own counters, read at its end: exact, and no process
  }

  @Override
  public synchronized void begin(Holder holder) {
    if (holder.pid() > 0) {
      // A warm executor's counters were read at its previous call's end, and it has waited for
      // this call since (blocked, not on a CPU): that reading spares a pass over procfs here.
      Baseline known = baselines.get(holder.pid());
      long cpu = known != null ? known.cpuNanos() : cpuNanos(holder.pid());
      baselines.put(holder.pid(), new Baseline(cpu, System.nanoTime()));
    }
  }

  @Override
  public synchronized Map<Integer, Double> sample(Collection<Holder> holders) {
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

  /** On-CPU plus run-queue nanoseconds of every thread of the process. */
  static long cpuNanos(long pid) {
    if (!SCHEDSTAT) {
      return cpuTimeNanos(pid);
    }
    java.nio.file.Path tasks = java.nio.file.Path.of("/proc", Long.toString(pid), "task");
    try (java.util.stream.Stream<java.nio.file.Path> threads = java.nio.file.Files.list(tasks)) {
      long total = 0;
      for (java.nio.file.Path thread : (Iterable<java.nio.file.Path>) threads::iterator) {
        total += schedstat(thread.resolve("schedstat"));
      }
      return total;
    } catch (java.io.IOException | RuntimeException noSchedstat) {
      return cpuTimeNanos(pid);
    }
  }

  private static long schedstat(java.nio.file.Path file) throws java.io.IOException {
    try {
      String[] fields = java.nio.file.Files.readString(file).trim().split("\\s+");
      return Long.parseLong(fields[0]) + Long.parseLong(fields[1]);
    } catch (java.nio.file.NoSuchFileException threadEnded) {
      return 0;
    }
  }

  private static long cpuTimeNanos(long pid) {
    Optional<Duration> cpu = ProcessHandle.of(pid).flatMap(p -> p.info().totalCpuDuration());
    return cpu.map(Duration::toNanos).orElse(0L);
  }

  @Override
  public String name() {
    return "simulated: the executor's share of time running or runnable";
  }
}
