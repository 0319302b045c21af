package dev.bulletin.runtime.harness;

import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Which executor process ran a call: the harness's {@code write_pid} functions write their
 * process id to a file the test names. How a test sees that an executor was killed and replaced.
 */
public final class ExecutorPids {

  private ExecutorPids() {}

  /** Waits for the call to write its pid file, and reads it. */
  public static long await(Path pidFile) throws IOException, InterruptedException {
    long deadline = System.nanoTime() + RuntimeHarness.PATIENCE.toNanos();
    while (!Files.exists(pidFile)) {
      if (System.nanoTime() > deadline) {
        fail("no call wrote " + pidFile + " within " + RuntimeHarness.PATIENCE);
      }
      Thread.sleep(20);
    }
    return Long.parseLong(Files.readString(pidFile).strip());
  }

  /** Waits until the process is gone (killed and reaped). */
  public static void awaitExit(long pid) throws InterruptedException {
    long deadline = System.nanoTime() + RuntimeHarness.PATIENCE.toNanos();
    while (ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false)) {
      if (System.nanoTime() > deadline) {
        fail("executor process " + pid + " is still alive after " + RuntimeHarness.PATIENCE);
      }
      Thread.sleep(20);
    }
  }
}
