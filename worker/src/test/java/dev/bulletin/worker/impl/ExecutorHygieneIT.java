package dev.bulletin.worker.impl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.worker.impl.AgentHarness.Recorder;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * What one call does to its executor does not reach the next call: limits are set back, a
 * damaged executor is replaced, executors are retired after a number of calls. Real executors
 * ({@link AgentHarness}); the calls run on GPU 0, whose slot has one executor, so consecutive
 * calls meet the same executor unless it was replaced.
 */
class ExecutorHygieneIT {

  private static final List<Integer> GPU0 = List.of(0);

  @TempDir Path folder;

  @Test
  void aMemoryLimitACallLowersDoesNotOutliveIt() throws Exception {
    try (AgentHarness harness = AgentHarness.start(folder)) {
      ObjectKey noArgs = harness.pickle("((), {})");
      Recorder before = harness.runPrinting("t1", harness.pickle(
          "lambda: print(resource.getrlimit(resource.RLIMIT_AS))"), noArgs, GPU0);
      // The call of the issue: it lowers its own address-space limit and returns.
      harness.runPrinting("t2", harness.pickle("lambda: resource.setrlimit(resource.RLIMIT_AS,"
          + " (1 << 26, resource.getrlimit(resource.RLIMIT_AS)[1]))"), noArgs, GPU0);
      // The next call maps 64 MiB of arguments: with the limit left in place that failed with
      // OSError(12, 'Cannot allocate memory') while loading them, for every later call.
      Recorder after = harness.runPrinting("t3", harness.pickle(
          "lambda a: print(resource.getrlimit(resource.RLIMIT_AS), len(a))"),
          harness.pickle("((bytes(64 << 20),), {})"), GPU0);
      assertEquals(before.stdout().strip() + " " + (64 << 20), after.stdout().strip());
      assertEquals(before.executor, after.executor, "the limit was set back: no replacement");
    }
  }

  @Test
  void anExecutorWhoseImportStateACallBrokeIsReplacedAndTheCallRunsOnAFreshOne()
      throws Exception {
    try (AgentHarness harness = AgentHarness.start(folder)) {
      Recorder breaker = harness.runPrinting("t1", harness.pickle(
          "lambda: sys.modules.__setitem__('fractions', None)"), harness.pickle("((), {})"), GPU0);
      // Its arguments need the module the first call broke: loading them fails on that executor.
      ObjectKey args = harness.pickle("((__import__('fractions').Fraction(1, 3),), {})");
      Recorder next = harness.runPrinting("t2", harness.pickle("lambda f: print(f * 3)"), args,
          GPU0);
      assertEquals("1\n", next.stdout(), "the call ran, once, on a fresh executor");
      assertNotEquals(breaker.executor, next.executor);
      assertTrue(next.stderr().contains("could not load the call after an earlier call"),
          next.stderr());
      assertTrue(next.stderr().contains("task t2: cannot load its function or arguments"),
          next.stderr());
      // The fresh executor serves the slot from now on.
      Recorder third = harness.runPrinting("t3", harness.pickle("lambda f: print(f * 6)"), args,
          GPU0);
      assertEquals(next.executor, third.executor);
    }
  }

  @Test
  void anExecutorIsRetiredAfterItsMaximumOfCalls() throws Exception {
    try (AgentHarness harness = AgentHarness.start(folder, 2,
        dev.bulletin.worker.WorkerOptions.DEFAULT_EXECUTOR_IDLE_MILLIS)) {
      ObjectKey function = harness.pickle("lambda: print(os.getpid())");
      ObjectKey args = harness.pickle("((), {})");
      Recorder first = harness.runPrinting("t1", function, args, GPU0);
      Recorder second = harness.runPrinting("t2", function, args, GPU0);
      Recorder third = harness.runPrinting("t3", function, args, GPU0);
      assertEquals(first.executor, second.executor);
      assertNotEquals(second.executor, third.executor, "retired after 2 calls");
      assertNotEquals(second.stdout(), third.stdout(), "a new process");
    }
  }
}
