package dev.bulletin.runtime.metrics;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.runtime.identity.Identity;
import dev.bulletin.runtime.scheduler.Demand;
import dev.bulletin.runtime.task.Task;
import dev.bulletin.runtime.task.TaskState;
import dev.bulletin.runtime.task.TaskTable;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

class CallMetersTest {

  private final PrometheusMeterRegistry registry =
      new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
  private final TaskTable table = new TaskTable();

  CallMetersTest() {
    table.listen(new CallMeters(registry));
  }

  private Task add(String id, String qos) {
    ObjectKey object = ObjectKey.of("ada", "0".repeat(32));
    Task task = new Task(id, "secret_name_" + id, new Identity("ada", "default", true),
        new Demand(1, 1, 0), object, object, List.of(), 0, event -> { }, System.nanoTime());
    task.scheduling(qos, 0, 0, Duration.ofHours(1));
    table.add(task);
    return task;
  }

  private double calls(String state, String qos) {
    return registry.get(CallMeters.CALLS).tag("state", state).tag("qos", qos).gauge().value();
  }

  @Test
  void countsCallsByStateAndQosAndTimesTheirWaitAndRun() {
    Task a = add("a", "interactive");
    Task b = add("b", "interactive");
    add("c", "batch");
    assertEquals(2, calls("queued", "interactive"));
    assertEquals(1, calls("queued", "batch"));

    table.transitionQuietly(a, TaskState.PLACED);
    a.startedAt(System.nanoTime());
    table.transitionQuietly(a, TaskState.RUNNING);
    assertEquals(1, calls("queued", "interactive"));
    assertEquals(1, calls("running", "interactive"));
    table.transitionQuietly(a, TaskState.FINISHED);
    table.transitionQuietly(b, TaskState.CANCELLED);
    assertEquals(0, calls("running", "interactive"));
    assertEquals(0, calls("queued", "interactive"));
    assertEquals(1, registry.get(CallMeters.ENDED).tag("state", "finished")
        .tag("qos", "interactive").counter().count());
    assertEquals(1, registry.get(CallMeters.ENDED).tag("state", "cancelled").counter().count());
    assertEquals(1, registry.get(CallMeters.QUEUE_WAIT).timer().count());
    assertEquals(1, registry.get(CallMeters.RUN).timer().count());

    String scrape = registry.scrape();
    // Prometheus names and base units, histogram buckets, and no task id or name as a label.
    assertTrue(scrape.contains("bulletin_calls{qos=\"batch\",state=\"queued\"} 1"), scrape);
    assertTrue(scrape.contains("bulletin_calls_ended_total{"), scrape);
    assertTrue(scrape.contains("bulletin_call_queue_wait_seconds_bucket{"), scrape);
    assertTrue(scrape.contains("bulletin_call_run_seconds_count{qos=\"interactive\"} 1"), scrape);
    assertTrue(!scrape.contains("secret_name") && !scrape.contains("\"a\""), scrape);
  }
}
