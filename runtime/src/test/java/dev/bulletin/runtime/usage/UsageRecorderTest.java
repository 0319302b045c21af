package dev.bulletin.runtime.usage;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.bridge.ObjectStores;
import dev.bulletin.protocol.FailureCode;
import dev.bulletin.protocol.TaskEvent;
import dev.bulletin.protocol.TaskFailure;
import dev.bulletin.protocol.TaskState;
import dev.bulletin.runtime.control.ControlPlane;
import dev.bulletin.runtime.control.PolicyPass;
import dev.bulletin.runtime.identity.Identity;
import dev.bulletin.runtime.scheduler.Demand;
import dev.bulletin.runtime.scheduler.WorkerSlots;
import dev.bulletin.runtime.scheduler.policy.PolicyConfig;
import dev.bulletin.runtime.task.Task;
import dev.bulletin.runtime.workers.AttachedWorker;
import dev.bulletin.runtime.workers.WorkerLink;
import dev.bulletin.worker.CallListener;
import dev.bulletin.worker.CallOutcome;
import dev.bulletin.worker.CallRequest;
import dev.bulletin.worker.GpuUsage;
import dev.bulletin.worker.WorkerStatusView;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.vertx.core.Context;
import io.vertx.core.Vertx;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The ledger's records and meters from what the control plane and the workers report. */
class UsageRecorderTest {

  /** Keeps what it is given: the ledger without its database. */
  private static final class ListStore implements UsageStore {
    final List<UsageRecord> records = new ArrayList<>();

    @Override public void append(UsageRecord record) { records.add(record); }
    @Override public void creditsEarned(String group, double credits, Instant at) { }
    @Override public CompletableFuture<List<UsageTotals>> totals(Instant since, Instant until,
        By by, String onlyUser) { return CompletableFuture.completedFuture(List.of()); }
    @Override public CompletableFuture<Void> flush() { return CompletableFuture.completedFuture(null); }
    @Override public void close() { }
  }

  /** A worker whose samples say GPU 0 is half busy and GPU 1 a quarter. */
  private static final class SampledLink implements WorkerLink {
    @Override public CompletableFuture<CallOutcome> run(CallRequest r, CallListener l) {
      return new CompletableFuture<>();
    }
    @Override public void stop(String taskId, String reason) { }
    @Override public WorkerStatusView status() { return new WorkerStatusView(0, 0, 0); }
    @Override public void preempt(String taskId, String reason, Duration grace) { }
    @Override public GpuUsage usage() {
      return new GpuUsage() {
        @Override public Map<Integer, Double> current() { return Map.of(0, 0.5, 1, 0.25); }
        @Override public double takeBusyGpuSeconds(String taskId) { return 0; }
        @Override public String source() { return "test"; }
      };
    }
  }

  @Test
  void recordsAnEndedCallAndKeepsTheMeters(@TempDir Path folder) throws Exception {
    Vertx vertx = Vertx.vertx();
    try (ObjectStore store = ObjectStores.inFolder(folder)) {
      Context context = vertx.getOrCreateContext();
      ListStore ledger = new ListStore();
      SimpleMeterRegistry registry = new SimpleMeterRegistry();
      CompletableFuture<Void> done = new CompletableFuture<>();
      context.runOnContext(ignored -> {
        try {
          ControlPlane plane = new ControlPlane(context, store, new PolicyPass(
              PolicyConfig.defaults(), Clock.systemUTC(), Duration.ofSeconds(60), 1), 1 << 20,
              60, Map.of(), new dev.bulletin.runtime.control.Journaling(
                  dev.bulletin.runtime.journal.StateJournal.disabled()));
          plane.attach(new AttachedWorker("w1", "w1.lab", "", List.of("GPU", "GPU"), true, 0,
              "", new WorkerSlots("w1", 2, true, 4, 0), new SampledLink(), ""));
          UsageRecorder recorder = new UsageRecorder(plane, ledger, registry);
          Task task = new Task("t1", "train", new Identity("alice", "vision", false),
              new Demand(2, 1, 0), ObjectKey.of("alice", "f".repeat(32)),
              ObjectKey.of("alice", "a".repeat(32)), List.of(), 0, event -> { }, 0);
          long t0 = System.nanoTime();
          task.usage().reserved("w1", t0);
          task.usage().running(t0 + 1_000_000_000L);
          task.usage().released(2, 3.0, t0 + 11_000_000_000L);
          recorder.ended(task, TaskEvent.newBuilder().setTaskId("t1").setState(TaskState.ERROR)
              .setFailure(TaskFailure.newBuilder().setCode(FailureCode.TIMED_OUT)).build());
          recorder.refresh();
          done.complete(null);
        } catch (Throwable e) {
          done.completeExceptionally(e);
        }
      });
      done.get(30, TimeUnit.SECONDS);

      UsageRecord record = ledger.records.get(0);
      assertEquals("alice", record.user());
      assertEquals("vision", record.group());
      assertEquals("w1", record.worker());
      assertEquals(11, record.reservedSeconds(), 1e-6);
      assertEquals(10, record.runningSeconds(), 1e-6);
      assertEquals(22, record.gpuSecondsReserved(), 1e-6);
      assertEquals(3, record.gpuSecondsBusy(), 1e-6);
      assertEquals("error:TIMED_OUT", record.outcome());

      assertEquals(22, registry.get("bulletin.gpu.seconds.reserved").tag("user", "alice")
          .tag("group", "vision").counter().count(), 1e-6);
      assertEquals(3, registry.get("bulletin.gpu.seconds.busy").tag("user", "alice")
          .tag("group", "vision").counter().count(), 1e-6);
      assertEquals(0.75, registry.get("bulletin.gpus").tag("worker", "w1").tag("state", "busy")
          .gauge().value(), 1e-9);
    } finally {
      vertx.close().await();
    }
  }
}
