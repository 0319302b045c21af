package dev.bulletin.runtime.metrics;

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
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * What the metrics add to one call on the control plane's loop, without the noise of a whole
 * runtime: a call's life through the task table (queued, placed, running, finished) with and
 * without {@link CallMeters} listening, plus the scheduling pass timer's record, in the same
 * JVM, alternating. Runs only with {@code -Dbulletin.bench=true}; prints, asserts nothing.
 *
 * <pre>
 * mvn -o -pl runtime -am test -Dtest=MetricsBench -Dsurefire.failIfNoSpecifiedTests=false \
 *     -Dbulletin.bench=true
 * </pre>
 */
class MetricsBench {
  private static final int CALLS = 200_000;

  @Test
  void nanosecondsPerCall() {
    Assumptions.assumeTrue(Boolean.getBoolean("bulletin.bench"), "set -Dbulletin.bench=true");
    PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    CallMeters meters = new CallMeters(registry);
    ObjectKey object = ObjectKey.of("ada", "0".repeat(32));
    Identity ada = new Identity("ada", "default", true);
    double[] best = {Double.MAX_VALUE, Double.MAX_VALUE};
    for (int round = 0; round < 10; round++) {
      for (int on = 0; on < 2; on++) {
        TaskTable table = new TaskTable();
        if (on == 1) {
          table.listen(meters);
        }
        long start = System.nanoTime();
        for (int i = 0; i < CALLS; i++) {
          Task task = new Task("t" + i, "f", ada, new Demand(0, 1, 0), object, object, List.of(),
              0, event -> { }, System.nanoTime());
          task.scheduling("interactive", 0, 0, Duration.ofHours(1));
          table.add(task);
          table.transitionQuietly(task, TaskState.PLACED);
          task.startedAt(System.nanoTime());
          table.transitionQuietly(task, TaskState.RUNNING);
          table.transitionQuietly(task, TaskState.FINISHED);
        }
        best[on] = Math.min(best[on], (System.nanoTime() - start) / (double) CALLS);
      }
    }
    // The pass timer: one record per run of scheduling passes.
    io.micrometer.core.instrument.Timer pass = ClusterMeters.passTimer(registry);
    long start = System.nanoTime();
    for (int i = 0; i < CALLS; i++) {
      pass.record(i, java.util.concurrent.TimeUnit.NANOSECONDS);
    }
    double passNanos = (System.nanoTime() - start) / (double) CALLS;
    System.out.printf("a call's life in the task table: %.0f ns without metrics, %.0f ns with"
        + " (+%.0f ns per call); the pass timer: %.0f ns per run of passes%n", best[0], best[1],
        best[1] - best[0], passNanos);
  }
}
