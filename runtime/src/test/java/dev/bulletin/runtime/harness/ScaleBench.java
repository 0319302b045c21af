package dev.bulletin.runtime.harness;

import dev.bulletin.protocol.LogSetup;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
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
 *
 * <p>The runtime's CPU is its Java threads'. The collector's threads are not Java threads, and
 * they collect the whole JVM's garbage (the clients' and the simulated workers' too): the bench
 * prints their CPU per call apart ({@code JVM GC us/call}), with what the runtime's threads
 * allocated per call and their share of all the JVM allocated, which is roughly their share of
 * that collector time.
 *
 * <p>Beside each run, its peer ({@link LoopbackWrites}): what raw loopback writes to as many
 * connections as the run had users cost the writer at the pace the runtime wrote to them, times
 * the messages a call cost its user: the part of the runtime's cost that writing each result to
 * its own user takes before any of bulletin's work. Sizes listed more than once (two rounds:
 * {@code 10,100,1000,10,100,1000}) get the medians of their rounds too.
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
        + "%8s %6s %16s %14s %16s %12s %14s %14s %14s %14s %12s %20s%n", calls,
        System.getProperty("bulletin.bench.qos", "").isEmpty() ? "default (interactive)"
            : System.getProperty("bulletin.bench.qos"), "workers", "users", "runtime us/call",
        "of it kernel", "calls/s per core", "calls/s wall", "refill p50 ms", "refill p99 ms",
        "client msgs/call", "worker msgs/call", "JVM GC us/call",
        "runtime KB/call (share)"));
    StringBuilder floors = new StringBuilder(String.format(Locale.ROOT,
        "%nthe peer: raw loopback writes, one Vert.x loop writing to the users' connections in"
        + " turn at the pace the runtime wrote to them (LoopbackWrites)%n"
        + "%8s %6s %14s %16s %14s %22s%n", "workers", "users", "writes/s", "writer us/write",
        "of it kernel", "us/call at msgs/call"));
    Map<Integer, List<double[]>> rounds = new TreeMap<>();
    for (String size : sizes) {
      Path home = Files.createTempDirectory("bulletin-scale");
      ScaleRun.Result r = ScaleRun.run(home, Integer.parseInt(size.trim()), 8, calls);
      int pace = (int) Math.max(100, r.callsPerSecond() * r.clientMessagesPerCall());
      LoopbackWrites.Cost floor = LoopbackWrites.measure(r.users(), Math.min(50_000, 5 * pace),
          pace, BenchUsers.clientLoops());
      floors.append(String.format(Locale.ROOT, "%8d %6d %14d %16.1f %14.1f %22.1f%n",
          r.workers(), r.users(), pace, floor.cpuMicrosPerWrite(), floor.kernelMicrosPerWrite(),
          floor.cpuMicrosPerWrite() * r.clientMessagesPerCall()));
      rounds.computeIfAbsent(r.workers(), ignored -> new ArrayList<>()).add(
          new double[] {r.runtimeCpuMicrosPerCall(), r.runtimeKernelMicrosPerCall(),
              floor.cpuMicrosPerWrite() * r.clientMessagesPerCall()});
      table.append(String.format(Locale.ROOT,
          "%8d %6d %16.1f %14.1f %16.0f %12.0f %14.2f %14.2f %14.2f %14.2f %12.1f"
              + " %12.1f (%3.0f%%)%s%n",
          r.workers(), r.users(), r.runtimeCpuMicrosPerCall(), r.runtimeKernelMicrosPerCall(),
          r.callsPerRuntimeCoreSecond(),
          r.callsPerSecond(), r.refillP50Millis(), r.refillP99Millis(), r.clientMessagesPerCall(),
          r.workerMessagesPerCall(), r.jvmGcMicrosPerCall(), r.runtimeBytesPerCall() / 1024,
          100 * r.runtimeShareOfAllocation(),
          r.finished() == calls ? "" : "  (only " + r.finished() + " ended)"));
    }
    System.out.println(table);
    System.out.println(floors);
    System.out.println(medians(rounds));
  }

  /** Per size run more than once, the medians of its rounds (this machine's noise is wide). */
  private static String medians(Map<Integer, List<double[]>> rounds) {
    StringBuilder out = new StringBuilder(String.format(Locale.ROOT,
        "medians of the rounds%n%8s %7s %16s %14s %16s %20s%n", "workers", "rounds",
        "runtime us/call", "of it kernel", "calls/s per core", "user writes us/call"));
    boolean any = false;
    for (Map.Entry<Integer, List<double[]>> size : rounds.entrySet()) {
      List<double[]> runs = size.getValue();
      if (runs.size() < 2) {
        continue;
      }
      any = true;
      double cpu = median(runs, 0);
      out.append(String.format(Locale.ROOT, "%8d %7d %16.1f %14.1f %16.0f %20.1f%n",
          size.getKey(), runs.size(), cpu, median(runs, 1), 1e6 / cpu, median(runs, 2)));
    }
    return any ? out.toString() : "";
  }

  private static double median(List<double[]> runs, int column) {
    double[] values = runs.stream().mapToDouble(run -> run[column]).sorted().toArray();
    int middle = values.length / 2;
    return values.length % 2 == 1 ? values[middle] : (values[middle - 1] + values[middle]) / 2;
  }
}
