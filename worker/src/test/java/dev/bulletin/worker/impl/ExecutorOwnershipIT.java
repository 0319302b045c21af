package dev.bulletin.worker.impl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.worker.impl.AgentHarness.Recorder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Executors belong to one user: what ada's call leaves in its process is never seen by bob's,
 * ada's own calls stay warm, and a user's idle executors go after the idle time. Real executors
 * ({@link AgentHarness}).
 */
class ExecutorOwnershipIT {

  private static final List<Integer> GPU0 = List.of(0);
  private static final List<Integer> CPU = List.of();

  /** Leaves a global in __main__, a builtin and a module behind, and prints its pid. */
  private static final String LEAVE_TRACES = "lambda: [setattr(sys.modules['__main__'],"
      + " 'ada_secret', 1), setattr(__import__('builtins'), 'ada_builtin', 2),"
      + " sys.modules.__setitem__('ada_module', sys), print(os.getpid())]";
  /** Prints what it finds of ada's traces, and its pid. */
  private static final String LOOK_FOR_TRACES = "lambda: print(hasattr(sys.modules['__main__'],"
      + " 'ada_secret'), hasattr(__import__('builtins'), 'ada_builtin'),"
      + " 'ada_module' in sys.modules, os.getpid())";

  @TempDir Path folder;

  @Test
  void whatOneUsersCallLeavesInItsExecutorIsNeverSeenByAnotherUsersCall() throws Exception {
    try (AgentHarness harness = AgentHarness.start(folder)) {
      for (List<Integer> slot : List.of(GPU0, CPU)) {
        String task = slot.isEmpty() ? "cpu" : "gpu";
        Recorder ada = harness.runPrinting(task + "-ada", harness.pickle("ada", LEAVE_TRACES),
            harness.pickle("ada", "((), {})"), slot);
        Recorder adaAgain = harness.runPrinting(task + "-ada-2",
            harness.pickle("ada", LOOK_FOR_TRACES), harness.pickle("ada", "((), {})"), slot);
        Recorder bob = harness.runPrinting(task + "-bob", harness.pickle("bob", LOOK_FOR_TRACES),
            harness.pickle("bob", "((), {})"), slot);
        assertTrue(adaAgain.stdout().startsWith("True True True "),
            "ada's own next call runs warm, in the same process: " + adaAgain.stdout());
        assertEquals(ada.executor, adaAgain.executor);
        assertTrue(bob.stdout().startsWith("False False False "), bob.stdout());
        assertNotEquals(ada.executor, bob.executor);
        if (!slot.isEmpty()) {
          // On a GPU, ada's idle executor gave way to bob's: its process (and GPU memory) is gone.
          String adaPid = ada.stdout().strip();
          assertTrue(waitGone(adaPid), "ada's executor on GPU 0 still runs (pid " + adaPid + ")");
        }
      }
    }
  }

  @Test
  void aUsersIdleExecutorsAreRetiredAfterTheIdleTime() throws Exception {
    try (AgentHarness harness = AgentHarness.start(folder, 0, 1_000)) {
      ObjectKey pid = harness.pickle("ada", "lambda: print(os.getpid())");
      ObjectKey args = harness.pickle("ada", "((), {})");
      Recorder first = harness.runPrinting("t1", pid, args, CPU);
      Recorder warm = harness.runPrinting("t2", pid, args, CPU);
      assertEquals(first.stdout(), warm.stdout(), "within the idle time, the call runs warm");
      assertTrue(waitGone(first.stdout().strip()), "retired after 1 s idle");
      Recorder later = harness.runPrinting("t3", pid, args, CPU);
      assertNotEquals(first.executor, later.executor);
    }
  }

  private static boolean waitGone(String pid) throws InterruptedException {
    long deadline = System.nanoTime() + 10_000_000_000L;
    while (System.nanoTime() < deadline) {
      if (!Files.exists(Path.of("/proc", pid))) {
        return true;
      }
      Thread.sleep(50);
    }
    return false;
  }
}
