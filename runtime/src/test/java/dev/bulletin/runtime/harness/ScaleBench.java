package dev.bulletin.runtime.harness;

import dev.bulletin.protocol.LogSetup;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * {@code make bench-scale}: one runtime and 10, 100 and 1,000 SIMULATED workers (8 simulated
 * GPUs each, answering every call at once: {@link SimulatedWorkers}), 100,000 one-GPU calls
 * submitted at once, split among as many users as fill the slots ({@link BenchUsers}: each a
 * token and session of their own). Prints the runtime's CPU per call and the kernel's part of it
 * (on loopback a write also runs the receiving side's TCP input, which on a real network
 * runs on the receiving host; the JVM reads user time in 10 ms ticks), the calls one runtime
 * core would sustain at that cost, wall-clock calls per second, and how soon a freed slot got
 * its next call (the placement-to-dispatch latency with the queue deep). Runs only with
 * {@code -Dbulletin.bench=true}; asserts nothing about time. {@code -Dbulletin.bench.calls=N}
 * and {@code -Dbulletin.bench.workers=10,100} resize it; {@code -Dbulletin.bench.qos=batch}
 * submits them in that class (no per-user cap: one user fills the cluster);
 * {@code -Dbulletin.bench.users=N} sets the users (the default class, interactive, runs at most
 * 4 calls per user at once: by default slots / 4 users, one for batch);
 * {@code -Dbulletin.bench.threads=true} prints the runtime's CPU per thread, and its kernel part;
 * {@code -Dbulletin.bench.clientLoops=N} sets the event loops the clients share (see
 * {@link BenchUsers}).
 */
class ScaleBench {

  @Test
  void oneRuntimeManyWorkers() throws Exception {
    Assumptions.assumeTrue(Boolean.getBoolean("bulletin.bench"), "set -Dbulletin.bench=true");
    // The runtime logs as a real one does (LogSetup: a line per call, queued for a thread of
    // its own, which counts as the runtime's), not through the test JVM's file handler, which
    // formats each record with SimpleFormatter on the event loop: about 30 µs a call, 10 % of
    // the loop at 10 workers, that no runtime spends.
    java.util.logging.Logger root = java.util.logging.Logger.getLogger("");
    java.util.logging.Handler[] testHandlers = root.getHandlers();
    for (java.util.logging.Handler handler : testHandlers) {
      root.removeHandler(handler);
    }
    java.util.logging.Handler runtimeLog = LogSetup.runtimeHandler(new java.io.PrintStream(
        Files.newOutputStream(Path.of("target", "scale-bench.log")), false,
        java.nio.charset.StandardCharsets.UTF_8));
    root.addHandler(runtimeLog);
    try {
      run();
    } finally {
      root.removeHandler(runtimeLog);
      runtimeLog.close();
      for (java.util.logging.Handler handler : testHandlers) {
        root.addHandler(handler);
      }
    }
  }

  private static void run() throws Exception {
    int calls = Integer.getInteger("bulletin.bench.calls", 100_000);
    String[] sizes = System.getProperty("bulletin.bench.workers", "10,100,1000").split(",");
    // A short run first: the measured runs see compiled code, as a runtime after its first
    // minutes does.
    ScaleRun.run(Files.createTempDirectory("bulletin-scale-warm"), 10, 8, Math.min(calls, 20_000));
    StringBuilder table = new StringBuilder(String.format(Locale.ROOT,
        "%n== one runtime, simulated workers x 8 GPUs, %d calls queued at once, QoS %s ==%n"
        + "%8s %6s %16s %14s %16s %12s %14s %14s %14s%n", calls,
        System.getProperty("bulletin.bench.qos", "").isEmpty() ? "default (interactive)"
            : System.getProperty("bulletin.bench.qos"), "workers", "users", "runtime us/call",
        "of it kernel", "calls/s per core", "calls/s wall", "refill p50 ms", "refill p99 ms",
        "client msgs/call"));
    for (String size : sizes) {
      Path home = Files.createTempDirectory("bulletin-scale");
      ScaleRun.Result r = ScaleRun.run(home, Integer.parseInt(size.trim()), 8, calls);
      table.append(String.format(Locale.ROOT,
          "%8d %6d %16.1f %14.1f %16.0f %12.0f %14.2f %14.2f %14.2f%s%n",
          r.workers(), r.users(), r.runtimeCpuMicrosPerCall(), r.runtimeKernelMicrosPerCall(),
          r.callsPerRuntimeCoreSecond(),
          r.callsPerSecond(), r.refillP50Millis(), r.refillP99Millis(), r.clientMessagesPerCall(),
          r.finished() == calls ? "" : "  (only " + r.finished() + " ended)"));
    }
    System.out.println(table);
  }
}
