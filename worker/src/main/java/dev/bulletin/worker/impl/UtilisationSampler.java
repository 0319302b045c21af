package dev.bulletin.worker.impl;

import dev.bulletin.worker.GpuInventory;
import dev.bulletin.worker.GpuUsage;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * Samples the worker's GPU utilisation every {@code period} while calls hold GPUs, and adds each
 * GPU's utilisation times the time since the call's previous sample to the call holding it:
 * GPU-seconds busy per call. A call's last stretch is sampled when it ends where the source is
 * cheap ({@link UtilisationSource#samplesAtCallEnd}), so a short call is measured too; else it is
 * charged at its GPUs' latest periodic sample, so that no call waits for nvidia-smi to end. Runs
 * on its own daemon thread, sampling outside the lock that calls' starts and ends take; a worker
 * without GPUs samples nothing.
 */
public final class UtilisationSampler implements GpuUsage, AutoCloseable {

  private static final class Running {
    UtilisationSource.Holder holder;
    long lastNanos;
    double busyGpuSeconds;
  }

  private final UtilisationSource source;
  private final int gpuCount;
  private final Map<String, Running> running = new LinkedHashMap<>();
  /** Totals of calls that ended, until the worker reports them. */
  private final Map<String, Double> ended = new LinkedHashMap<>() {
    @Override
    protected boolean removeEldestEntry(Map.Entry<String, Double> eldest) {
      return size() > 10_000; // nobody asked for these: a link that went away
    }
  };
  private volatile Map<Integer, Double> current = Map.of();
  /**
   * Each GPU's utilisation at the latest periodic sample, for a call's last stretch; emptied
   * when a period finds no call holding GPUs (then it says nothing of the next call's).
   */
  private Map<Integer, Double> latest = Map.of();
  private final ScheduledExecutorService thread;

  UtilisationSampler(UtilisationSource source, int gpuCount, long periodMillis) {
    this.source = source;
    this.gpuCount = gpuCount;
    this.thread = gpuCount == 0 ? null : Executors.newSingleThreadScheduledExecutor(runnable -> {
      Thread t = new Thread(runnable, "bulletin-gpu-sampler");
      t.setDaemon(true);
      return t;
    });
    if (thread != null) {
      thread.scheduleAtFixedRate(this::sampleAll, periodMillis, periodMillis,
          TimeUnit.MILLISECONDS);
    }
  }

  /** Real GPUs through nvidia-smi, simulated ones through the executors' CPU share. */
  public static UtilisationSampler forGpus(GpuInventory gpus, long periodMillis) {
    UtilisationSource source = gpus.simulated() ? new SimulatedUtilisation()
        : new NvidiaSmiUtilisation("nvidia-smi");
    return new UtilisationSampler(source, gpus.count(), periodMillis);
  }

  /** A call starts on an executor (again, after its executor was replaced: it adds up). */
  public synchronized void begin(String taskId, List<Integer> gpuIds, long pid) {
    if (gpuIds.isEmpty()) {
      return;
    }
    Running call = running.computeIfAbsent(taskId, id -> new Running());
    call.holder = new UtilisationSource.Holder(taskId, List.copyOf(gpuIds), pid);
    call.lastNanos = System.nanoTime();
    source.begin(call.holder);
  }

  /** The call ended: its last stretch is sampled and its total kept for {@link #takeBusyGpuSeconds}. */
  public void end(String taskId) {
    Running call;
    Map<Integer, Double> lastStretch;
    synchronized (this) {
      call = running.remove(taskId);
      if (call == null) {
        return;
      }
      lastStretch = latest;
    }
    if (source.samplesAtCallEnd()) {
      lastStretch = source.sample(List.of(call.holder));
    }
    synchronized (this) {
      accumulate(call, lastStretch, System.nanoTime());
      ended.put(taskId, call.busyGpuSeconds);
    }
  }

  @Override
  public synchronized double takeBusyGpuSeconds(String taskId) {
    Double total = ended.remove(taskId);
    return total == null ? 0 : total;
  }

  @Override
  public Map<Integer, Double> current() {
    return current;
  }

  @Override
  public String source() {
    return source.name();
  }

  private void sampleAll() {
    List<UtilisationSource.Holder> holders = new ArrayList<>();
    synchronized (this) {
      if (running.isEmpty()) {
        current = Map.of();
        latest = Map.of();
        return;
      }
      running.values().forEach(call -> holders.add(call.holder));
    }
    Map<Integer, Double> sample = source.sample(holders); // no call's start or end waits on it
    synchronized (this) {
      long now = System.nanoTime();
      latest = Map.copyOf(sample);
      Map<Integer, Double> held = new HashMap<>();
      for (Running call : running.values()) { // a call that ended meanwhile took its own share
        accumulate(call, sample, now);
        call.holder.gpuIds().forEach(gpu -> held.put(gpu, sample.getOrDefault(gpu, 0.0)));
      }
      current = Map.copyOf(held); // GPUs no call holds are not attributed, and not shown busy
    }
  }

  private static void accumulate(Running call, Map<Integer, Double> sample, long now) {
    double seconds = Math.max(0, now - call.lastNanos) / 1e9;
    for (int gpu : call.holder.gpuIds()) {
      call.busyGpuSeconds += sample.getOrDefault(gpu, 0.0) * seconds;
    }
    call.lastNanos = now;
  }

  /** How many GPUs the worker has (the ledger's denominators). */
  public int gpuCount() {
    return gpuCount;
  }

  @Override
  public void close() {
    if (thread != null) {
      thread.shutdownNow();
    }
  }
}
