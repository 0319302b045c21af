package dev.bulletin.runtime.metrics;

import dev.bulletin.runtime.task.Task;
import dev.bulletin.runtime.task.TaskState;
import dev.bulletin.runtime.task.TaskTable;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import java.time.Duration;
import java.time.Instant;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * Calls by state and QoS class, from the task table's state changes:
 * <ul>
 *   <li>{@code bulletin_calls{state="queued|placed|running", qos}}: calls in that state now;
 *   <li>{@code bulletin_calls_ended_total{state="finished|error|cancelled", qos}};
 *   <li>{@code bulletin_call_queue_wait_seconds{qos}} (histogram): submit to placement, per
 *       start (a requeued call counts again, from its first submit);
 *   <li>{@code bulletin_call_run_seconds{qos}} (histogram): each run, however it ended.
 * </ul>
 * Labels are the state and the QoS class only (both bounded by the config); never a task id.
 * Runs on the control plane's event loop, as the table's listener: the counts are plain ints
 * read by the gauges when /metrics is scraped on the same loop.
 */
public final class CallMeters implements TaskTable.Listener {
  public static final String CALLS = "bulletin.calls";
  public static final String ENDED = "bulletin.calls.ended";
  public static final String QUEUE_WAIT = "bulletin.call.queue.wait";
  public static final String RUN = "bulletin.call.run";
  /** Bucket bounds of both histograms: notebook calls take milliseconds to hours. */
  private static final Duration[] BUCKETS = {
      Duration.ofMillis(1), Duration.ofMillis(5), Duration.ofMillis(25), Duration.ofMillis(100),
      Duration.ofMillis(500), Duration.ofSeconds(2), Duration.ofSeconds(10),
      Duration.ofSeconds(60), Duration.ofMinutes(5), Duration.ofMinutes(30), Duration.ofHours(2),
      Duration.ofHours(8)};
  private static final TaskState[] LIVE = {TaskState.QUEUED, TaskState.PLACED, TaskState.RUNNING};

  private final MeterRegistry registry;
  /** Per QoS class: calls in each live state now. */
  private final Map<String, int[]> live = new HashMap<>();
  private final Map<String, EnumMap<TaskState, Counter>> ended = new HashMap<>();
  private final Map<String, Timer> queueWait = new HashMap<>();
  private final Map<String, Timer> run = new HashMap<>();

  public CallMeters(MeterRegistry registry) {
    this.registry = registry;
  }

  @Override
  public void moved(Task task, TaskState from, TaskState to) {
    String qos = task.qos() == null ? "" : task.qos();
    int[] counts = live(qos);
    if (from != null && !from.isTerminal()) {
      counts[from.ordinal()]--;
    }
    if (to.isTerminal()) {
      ended.computeIfAbsent(qos, q -> new EnumMap<>(TaskState.class)).computeIfAbsent(to,
          state -> Counter.builder(ENDED).description("Calls that ended, by how")
              .tag("state", name(state)).tag("qos", q(qos)).register(registry)).increment();
    } else {
      counts[to.ordinal()]++;
    }
    if (to == TaskState.RUNNING) {
      timer(queueWait, QUEUE_WAIT, "Time from submit to placement, per start", qos)
          .record((long) (task.queueSeconds(System.nanoTime()) * 1e9), TimeUnit.NANOSECONDS);
    } else if (from == TaskState.RUNNING && task.startedAt() != null) {
      timer(run, RUN, "Time calls ran, per run", qos)
          .record(Duration.between(task.startedAt(), Instant.now()));
    }
  }

  private int[] live(String qos) {
    int[] counts = live.get(qos);
    if (counts == null) {
      int[] created = new int[TaskState.values().length];
      for (TaskState state : LIVE) {
        Gauge.builder(CALLS, created, values -> values[state.ordinal()])
            .description("Calls in a state now").tag("state", name(state)).tag("qos", q(qos))
            .strongReference(true).register(registry);
      }
      live.put(qos, created);
      counts = created;
    }
    return counts;
  }

  private Timer timer(Map<String, Timer> timers, String name, String description, String qos) {
    return timers.computeIfAbsent(qos, q -> Timer.builder(name).description(description)
        .tag("qos", q(qos)).serviceLevelObjectives(BUCKETS).register(registry));
  }

  private static String name(TaskState state) {
    return state.name().toLowerCase(Locale.ROOT);
  }

  private static String q(String qos) {
    return qos.isEmpty() ? "none" : qos;
  }
}
