package dev.bulletin.worker.impl;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Path;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The sweep that ends an executor's processes where no cgroup can be had, on real processes: a
 * session leader with a child, a double-forked orphan that stayed in the session, and one that
 * also called setsid, which the sweep misses (docs/security.md says so).
 */
class ProcessSweepTest {

  @TempDir
  Path folder;

  @Test
  void theSessionAndTheDescendantsEndButNotADoubleForkThatLeftTheSession() throws Exception {
    Path orphan = folder.resolve("orphan");
    Path escaped = folder.resolve("escaped");
    Path child = folder.resolve("child");
    // setsid(1) makes the shell a session leader, as the executor makes itself.
    Process leader = new ProcessBuilder("setsid", "sh", "-c",
        "sleep 600 & echo $! > \"$1\"; (sleep 600 & echo $! > \"$2\");"
            + " (setsid sleep 600 & echo $! > \"$3\"); exec sleep 600", "sh", child.toString(),
        orphan.toString(), escaped.toString()).start();
    long escapee = 0;
    try {
      long direct = ExecutorCgroupsTest.pidIn(child);
      long orphaned = ExecutorCgroupsTest.pidIn(orphan);
      escapee = ExecutorCgroupsTest.pidIn(escaped);

      Set<Long> killed = ProcessSweep.end(leader.pid(), true, -1);

      assertTrue(killed.containsAll(Set.of(leader.pid(), direct, orphaned)), killed.toString());
      assertTrue(leader.waitFor(5, TimeUnit.SECONDS));
      for (long pid : new long[] {direct, orphaned}) {
        awaitGone(pid);
        assertTrue(ExecutorCgroupsTest.gone(pid), "process " + pid + " was swept");
      }
      assertFalse(killed.contains(escapee));
      assertFalse(ExecutorCgroupsTest.gone(escapee), "a double fork plus setsid escapes");
      assertFalse(killed.contains(ProcessHandle.current().pid()));
    } finally {
      leader.destroyForcibly();
      if (escapee > 0) {
        ProcessHandle.of(escapee).ifPresent(ProcessHandle::destroyForcibly);
      }
    }
  }

  @Test
  void aDeadLeadersSessionIsStillSwept() throws Exception {
    Path orphan = folder.resolve("orphan");
    Process leader = new ProcessBuilder("setsid", "sh", "-c",
        "(sleep 600 & echo $! > \"$1\"); exit 0", "sh", orphan.toString()).start();
    long orphaned = ExecutorCgroupsTest.pidIn(orphan);
    assertTrue(leader.waitFor(5, TimeUnit.SECONDS));
    try {
      Set<Long> killed = ProcessSweep.end(leader.pid(), false, -1);
      assertTrue(killed.contains(orphaned), killed.toString());
      assertFalse(killed.contains(leader.pid()));
      awaitGone(orphaned);
      assertTrue(ExecutorCgroupsTest.gone(orphaned));
    } finally {
      ProcessHandle.of(orphaned).ifPresent(ProcessHandle::destroyForcibly);
    }
  }

  private static void awaitGone(long pid) throws InterruptedException, IOException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
    while (!ExecutorCgroupsTest.gone(pid) && System.nanoTime() < deadline) {
      Thread.sleep(10);
    }
  }
}
