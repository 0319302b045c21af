package dev.bulletin.runtime.harness;

import dev.bulletin.protocol.TaskEvent;
import dev.bulletin.runtime.BulletinRuntime;
import dev.bulletin.runtime.RuntimeOptions;
import dev.bulletin.runtime.config.RuntimeConfig;
import dev.bulletin.runtime.harness.PythonCalls.Call;
import dev.bulletin.runtime.harness.PythonCalls.EncodedCall;
import dev.bulletin.worker.GpuInventory;
import dev.bulletin.worker.WorkerOptions;
import dev.bulletin.worker.tls.TlsOptions;
import io.vertx.core.Vertx;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.file.Path;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * One runtime, {@code workers} {@link SimulatedWorkers} and {@link BenchUsers} (each user a
 * session of their own) that submit {@code calls} one-GPU calls at once (so they queue) and wait
 * for every end. Measures the runtime's CPU per call (its threads only: every visible JVM thread
 * less the simulated workers', the clients' and the caller's), wall-clock calls per second, and
 * how soon a slot a worker freed gets its next call (CallEnded sent to the next RunCall received
 * there: the runtime's reaction, pass and dispatch, with the queue deep).
 */
final class ScaleRun {

  static final String WORKER_TOKEN = "scale-worker-token-0123456789";

  record Result(int workers, int users, int calls, long finished, Set<String> finishedIds,
      double runtimeCpuMicrosPerCall, double runtimeKernelMicrosPerCall, double callsPerSecond, double refillP50Millis,
      double refillP99Millis, int largestRunBatch, double clientMessagesPerCall,
      double workerMessagesPerCall, double jvmGcMicrosPerCall, double runtimeBytesPerCall,
      double runtimeShareOfAllocation,
      Set<com.google.protobuf.ByteString> resultBytes) {

    double callsPerRuntimeCoreSecond() {
      return 1e6 / runtimeCpuMicrosPerCall;
    }
  }

  private ScaleRun() {}

  /** A runtime whose own worker has no GPUs: simulated workers attach with WORKER_TOKEN. */
  static BulletinRuntime startRuntime(Path home) throws Exception {
    return startRuntime(home, RuntimeConfig.empty());
  }

  static BulletinRuntime startRuntime(Path home, RuntimeConfig config) throws Exception {
    WorkerOptions embedded = new WorkerOptions("head", PythonCalls.python(),
        GpuInventory.simulated(0), 1, 1L << 30, 0, 60_000, 0, 60_000, Map.of());
    RuntimeOptions options = RuntimeOptions.builder(home, embedded)
        .owner(RuntimeHarness.OWNER_TOKEN, RuntimeHarness.OWNER).workerToken(WORKER_TOKEN)
        .config(config).storeFolder(home.resolve("store")).spillFolder(home.resolve("spill"))
        .httpPort(-1).build();
    return BulletinRuntime.start(options, TlsOptions.plain(), () -> { });
  }

  /** The call the simulated workers answer: add(2, 3), returning 5. */
  static EncodedCall addCall(Path home) throws Exception {
    return PythonCalls.encode(home.resolve("calls"),
        List.of(Call.of("add", "add", 2, 3).returning(5))).get("add");
  }

  /**
   * In the QoS class {@code -Dbulletin.bench.qos} names (the default class if none), by
   * {@code -Dbulletin.bench.users} users (as many as fill the workers' slots if unset).
   */
  static Result run(Path home, int workers, int gpusPerWorker, int calls) throws Exception {
    return run(home, workers, gpusPerWorker, calls, System.getProperty("bulletin.bench.qos", ""));
  }

  static Result run(Path home, int workers, int gpusPerWorker, int calls, String qos)
      throws Exception {
    int users = Integer.getInteger("bulletin.bench.users",
        BenchUsers.toFill(workers * gpusPerWorker, qos));
    return run(home, workers, gpusPerWorker, calls, qos, users);
  }

  static Result run(Path home, int workers, int gpusPerWorker, int calls, String qos, int users)
      throws Exception {
    EncodedCall call = addCall(home);
    try (BulletinRuntime runtime = startRuntime(home,
             RuntimeHarness.config(home, BenchUsers.config(users)));
         SimulatedWorkers simulated = new SimulatedWorkers(runtime.address(), WORKER_TOKEN,
             workers, gpusPerWorker, call.result().orElseThrow().inline());
         BenchUsers clients = new BenchUsers(runtime.address(), users)) {
      Set<Long> notRuntime = new HashSet<>(clients.threadIds());
      notRuntime.add(simulated.threadId());
      notRuntime.add(Thread.currentThread().getId());
      Map<Long, Long> before = threadCpu();
      Map<Long, Long> userBefore = threadUser();
      Map<Long, Long> allocatedBefore = threadAllocated();
      long messagesBefore = clients.messages();
      long workerMessagesBefore = simulated.messages();
      long gcBefore = gcThreadsNanos();
      long start = System.nanoTime();
      clients.submit(calls, i -> call.spec("c" + i).setQos(qos));
      long deadline = System.nanoTime() + RuntimeHarness.PATIENCE.toNanos() * 4;
      while (simulated.calls() < calls && System.nanoTime() < deadline) {
        Thread.sleep(20);
      }
      Set<String> finished = new HashSet<>();
      Set<com.google.protobuf.ByteString> resultBytes = new HashSet<>();
      long ends = 0;
      while (System.nanoTime() < deadline) {
        finished.clear();
        List<TaskEvent> events = clients.finished();
        for (TaskEvent event : events) {
          finished.add(event.getTaskId());
          resultBytes.add(event.getResult().getValue().getInlineData());
        }
        ends = events.size();
        if (ends >= calls) {
          break;
        }
        Thread.sleep(50);
      }
      double seconds = (System.nanoTime() - start) / 1e9;
      Map<Long, Long> after = threadCpu();
      Map<Long, Long> userAfter = threadUser();
      Map<Long, Long> allocatedAfter = threadAllocated();
      long runtimeBytes = 0;
      long allBytes = 0;
      for (Map.Entry<Long, Long> thread : allocatedAfter.entrySet()) {
        long bytes = thread.getValue() - allocatedBefore.getOrDefault(thread.getKey(), 0L);
        allBytes += bytes;
        if (!notRuntime.contains(thread.getKey())) {
          runtimeBytes += bytes;
        }
      }
      long runtimeNanos = 0;
      long runtimeUserNanos = 0;
      StringBuilder byThread = new StringBuilder();
      for (Map.Entry<Long, Long> thread : after.entrySet()) {
        if (!notRuntime.contains(thread.getKey())) {
          long nanos = thread.getValue() - before.getOrDefault(thread.getKey(), 0L);
          long user = userAfter.getOrDefault(thread.getKey(), 0L)
              - userBefore.getOrDefault(thread.getKey(), 0L);
          runtimeNanos += nanos;
          runtimeUserNanos += user;
          if (nanos > 1000L * calls && Boolean.getBoolean("bulletin.bench.threads")) {
            java.lang.management.ThreadInfo info =
                ManagementFactory.getThreadMXBean().getThreadInfo(thread.getKey());
            byThread.append(String.format(java.util.Locale.ROOT,
                "  %s: %.1f us/call (%.1f of it in the kernel)%n",
                info == null ? thread.getKey() : info.getThreadName(), nanos / 1e3 / calls,
                (nanos - user) / 1e3 / calls));
          }
        }
      }
      // -Dbulletin.bench.threads=true: where the runtime's CPU went (threads over 1 µs a call).
      // The kernel part is the CPU time less the user time, which the JVM reads from /proc in
      // 10 ms ticks: it means something for a thread busy for seconds (the event loop), not
      // for a short run or a thread that is mostly idle.
      if (!byThread.isEmpty()) {
        System.out.print("runtime threads, " + workers + " workers:\n" + byThread);
      }
      List<Long> refills = simulated.refills();
      Collections.sort(refills);
      return new Result(workers, users, calls, ends, Set.copyOf(finished),
          runtimeNanos / 1e3 / calls, (runtimeNanos - runtimeUserNanos) / 1e3 / calls,
          calls / seconds, quantile(refills, 0.5) / 1e6,
          quantile(refills, 0.99) / 1e6, simulated.largestRunBatch(),
          (clients.messages() - messagesBefore) / (double) calls,
          (simulated.messages() - workerMessagesBefore) / (double) calls,
          (gcThreadsNanos() - gcBefore) / 1e3 / calls, runtimeBytes / (double) calls,
          allBytes == 0 ? 0 : runtimeBytes / (double) allBytes, Set.copyOf(resultBytes));
    }
  }

  static HarnessClient connect(String address) {
    int colon = address.lastIndexOf(':');
    return new HarnessClient(address.substring(0, colon),
        Integer.parseInt(address.substring(colon + 1)), RuntimeHarness.OWNER_TOKEN);
  }

  /** The event loop threads of a Vert.x: contexts made from outside take them in turn. */
  static Set<Long> eventLoops(Vertx vertx) throws Exception {
    Set<Long> ids = new HashSet<>();
    for (int i = 0; i < 4 * Runtime.getRuntime().availableProcessors(); i++) {
      CompletableFuture<Long> id = new CompletableFuture<>();
      vertx.getOrCreateContext().runOnContext(ignored ->
          id.complete(Thread.currentThread().getId()));
      ids.add(id.get(30, TimeUnit.SECONDS));
    }
    return ids;
  }

  /**
   * CPU nanoseconds of this JVM's garbage collector threads ({@code GC Thread#n}, {@code G1 ...}),
   * which the JVM does not show as Java threads, from /proc in clock ticks; 0 where there is no
   * /proc. They collect the whole JVM's garbage: the runtime's, the clients' and the simulated
   * workers'.
   */
  static long gcThreadsNanos() {
    long ticks = 0;
    java.io.File[] tasks = new java.io.File("/proc/self/task").listFiles();
    for (java.io.File task : tasks == null ? new java.io.File[0] : tasks) {
      try {
        String name = java.nio.file.Files.readString(task.toPath().resolve("comm")).trim();
        if (!name.startsWith("GC Thread") && !name.startsWith("G1 ")) {
          continue;
        }
        String stat = java.nio.file.Files.readString(task.toPath().resolve("stat"));
        // The fields after the command's closing parenthesis: utime and stime are 12th and 13th.
        String[] fields = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
        ticks += Long.parseLong(fields[11]) + Long.parseLong(fields[12]);
      } catch (java.io.IOException | RuntimeException gone) {
        // the thread ended between the listing and the read
      }
    }
    return ticks * 10_000_000L; // USER_HZ is 100 on Linux
  }

  /** Bytes each live JVM thread has allocated so far (what its garbage costs the collector). */
  private static Map<Long, Long> threadAllocated() {
    com.sun.management.ThreadMXBean threads =
        (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
    return perThread(threads, threads::getThreadAllocatedBytes);
  }

  /** CPU nanoseconds of every live JVM thread the platform shows, by thread id. */
  private static Map<Long, Long> threadCpu() {
    ThreadMXBean threads = ManagementFactory.getThreadMXBean();
    return perThread(threads, threads::getThreadCpuTime);
  }

  /** User-mode CPU nanoseconds of every live JVM thread, by thread id. */
  private static Map<Long, Long> threadUser() {
    ThreadMXBean threads = ManagementFactory.getThreadMXBean();
    return perThread(threads, threads::getThreadUserTime);
  }

  /** {@code reading} of every live thread that has one (-1: none), by thread id. */
  private static Map<Long, Long> perThread(ThreadMXBean threads,
      java.util.function.LongUnaryOperator reading) {
    Map<Long, Long> values = new HashMap<>();
    for (long id : threads.getAllThreadIds()) {
      long nanos = reading.applyAsLong(id);
      if (nanos >= 0) {
        values.put(id, nanos);
      }
    }
    return values;
  }

  private static double quantile(List<Long> sorted, double q) {
    if (sorted.isEmpty()) {
      return Double.NaN;
    }
    return sorted.get(Math.min(sorted.size() - 1, (int) (q * sorted.size())));
  }
}
