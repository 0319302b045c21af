package dev.bulletin.runtime.usage;

import dev.bulletin.protocol.TaskEvent;
import dev.bulletin.runtime.control.ControlPlane;
import dev.bulletin.runtime.identity.Identity;
import dev.bulletin.runtime.task.CallUsage;
import dev.bulletin.runtime.task.Task;
import dev.bulletin.runtime.task.TaskTable;
import dev.bulletin.runtime.workers.AttachedWorker;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import java.time.Instant;
import java.util.HashSet;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Turns the control plane's ended calls into usage records (persisted by the {@link UsageStore})
 * and keeps the usage meters: {@code bulletin.gpus{worker, state=busy}} (GPUs busy now, the sum
 * of their utilisation), {@code bulletin.gpu.seconds.reserved} and {@code .busy} counters per
 * user and group, and {@code bulletin.credits{group}}. Called on the control plane's loop; the
 * gauges read maps a scrape may read from any thread.
 */
public final class UsageRecorder implements TaskTable.Listener {
  /** How often the gauges read the workers' utilisation and the groups' credits. */
  public static final long REFRESH_MILLIS = 1000;
  private final UsageStore store;
  private final MeterRegistry registry;
  private final ControlPlane plane;
  private final Map<String, Double> busyByWorker = new ConcurrentHashMap<>();
  private final Map<String, Gauge> busyGauges = new ConcurrentHashMap<>();
  private final Map<String, Double> creditsByGroup = new ConcurrentHashMap<>();
  /**
   * Each user and group's counters by name, looked up once: registering a counter builds and
   * compares its id and tags, 2 % of the loop at 1,000 workers (make bench-scale, JFR).
   */
  private final Map<String, Map<Identity, Counter>> counters = new java.util.HashMap<>();

  public UsageRecorder(ControlPlane plane, UsageStore store, MeterRegistry registry) {
    this.plane = plane;
    this.store = store;
    this.registry = registry;
    plane.tasks().listen(this);
    plane.onCreditsEarned((group, credits) -> store.creditsEarned(group, credits, Instant.now()));
  }

  public UsageStore store() {
    return store;
  }

  /** A call ended: its record goes to the ledger, its GPU-seconds to the counters. */
  @Override
  public void ended(Task task, TaskEvent event) {
    CallUsage usage = task.usage();
    String outcome = event.getState().name().toLowerCase(Locale.ROOT)
        + (event.hasFailure() ? ":" + event.getFailure().getCode().name() : "");
    store.append(new UsageRecord(task.id(), task.name(), task.owner().user(),
        task.owner().group(), task.qos(), usage.worker(), task.demand().gpuShare(),
        task.submittedAt(), Instant.now(), task.queueSeconds(System.nanoTime()),
        usage.reservedSeconds(), usage.runningSeconds(), usage.gpuSecondsReserved(),
        usage.gpuSecondsBusy(), usage.creditsSpent(), usage.attempts(), outcome,
        usage.calls()));
    if (usage.wasLease()) {
      counter("bulletin.calls.leased", task).increment(usage.calls());
    }
    if (usage.gpuSecondsReserved() > 0) {
      counter("bulletin.gpu.seconds.reserved", task).increment(usage.gpuSecondsReserved());
      counter("bulletin.gpu.seconds.busy", task).increment(usage.gpuSecondsBusy());
    }
  }

  private Counter counter(String name, Task task) {
    return counters.computeIfAbsent(name, n -> new java.util.HashMap<>())
        .computeIfAbsent(task.owner(), owner -> Counter.builder(name).tag("user", owner.user())
            // No base unit: the name says it, and Prometheus' naming would append "_seconds".
            .tag("group", owner.group()).register(registry));
  }

  /** Reads the workers' latest utilisation and the groups' credits into the gauges. */
  public void refresh() {
    Set<String> seen = new HashSet<>();
    for (AttachedWorker worker : plane.workers()) {
      double busy = 0;
      for (double utilisation : worker.link().usage().current().values()) {
        busy += utilisation;
      }
      seen.add(worker.id());
      busyByWorker.put(worker.id(), busy);
      busyGauges.computeIfAbsent(worker.id(), id -> Gauge.builder("bulletin.gpus",
          busyByWorker, map -> map.getOrDefault(id, 0.0)).tag("worker", id).tag("state", "busy")
          .description("GPUs per worker; busy: the sum of their sampled utilisation")
          .register(registry));
    }
    // A worker that went away takes its series with it (worker ids are bounded by the pools).
    busyGauges.keySet().removeIf(id -> {
      if (seen.contains(id)) {
        return false;
      }
      registry.remove(busyGauges.get(id));
      busyByWorker.remove(id);
      return true;
    });
    plane.usage().groups().forEach((group, used) -> {
      double credits = used.credits();
      if (creditsByGroup.put(group, credits) == null) {
        Gauge.builder("bulletin.credits", creditsByGroup, map -> map.getOrDefault(group, 0.0))
            .tag("group", group).description("credits each group holds").register(registry);
      }
    });
  }

  /** GPUs busy now on one worker (the sum of their utilisation), as last refreshed. */
  public double busyGpus(String workerId) {
    return busyByWorker.getOrDefault(workerId, 0.0);
  }
}
