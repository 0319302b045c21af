package dev.bulletin.worker.impl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * An executor's cgroup v2 group against the kernel: a process that left its parent and its
 * session (double fork, setsid) is still in the group, and ends with it. Skipped, saying why,
 * where this JVM cannot have groups (no cgroup2 mount, not writable: not root).
 */
class ExecutorCgroupsTest {

  private static ExecutorCgroups groups;
  private static String refused;

  @TempDir
  Path folder;

  @BeforeAll
  static void groups() {
    try {
      groups = ExecutorCgroups.find(null);
    } catch (IOException e) {
      refused = e.getMessage();
    }
  }

  @BeforeEach
  void needsGroups() {
    Assumptions.assumeTrue(groups != null, () -> "no cgroup v2 group can be had here: "
        + refused);
  }

  /** Whether a process has ended (a zombie not reaped yet has). */
  static boolean gone(long pid) {
    try {
      String stat = Files.readString(Path.of("/proc/" + pid + "/stat"));
      return stat.substring(stat.lastIndexOf(')') + 2).startsWith("Z");
    } catch (IOException e) {
      return true;
    }
  }

  /**
   * Starts a shell that, once told to on its stdin (after it was put in its group), starts a
   * {@code sleep} that leaves it (a subshell's background job: double fork) and its session
   * (setsid), writes that sleep's pid to {@code escaped} and waits.
   */
  static Process escaper(Path escaped) throws IOException {
    return new ProcessBuilder("sh", "-c", "read go; (setsid sleep 600 & echo $! > \"$1\");"
        + " exec sleep 600", "sh", escaped.toString()).start();
  }

  static long pidIn(Path file) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (System.nanoTime() < deadline) {
      if (Files.exists(file) && Files.readString(file).endsWith("\n")) {
        return Long.parseLong(Files.readString(file).strip());
      }
      Thread.sleep(10);
    }
    throw new AssertionError("the shell did not write " + file);
  }

  @Test
  void aProcessThatLeftItsParentAndSessionEndsWithItsGroup() throws Exception {
    ExecutorCgroups.Group group = groups.create("test-e" + System.nanoTime(), 0);
    assertTrue(Files.isDirectory(group.folder()));
    assertTrue(group.folder().startsWith(groups.parent()));
    Path escaped = folder.resolve("escaped");
    Process shell = escaper(escaped);
    try {
      group.add(shell.pid());
      OutputStream go = shell.getOutputStream();
      go.write('\n');
      go.flush();
      long grandchild = pidIn(escaped);
      assertFalse(gone(grandchild));
      // It is in another session, under another parent, and still in the group.
      String stat = Files.readString(Path.of("/proc/" + grandchild + "/stat"));
      String[] fields = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
      assertEquals(Long.toString(grandchild), fields[3], "the grandchild leads its own session");
      assertTrue(Files.readString(group.folder().resolve("cgroup.procs"))
          .contains(Long.toString(grandchild)));

      group.end();

      assertTrue(shell.waitFor(5, TimeUnit.SECONDS), "the group's process ended");
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
      while (!gone(grandchild) && System.nanoTime() < deadline) {
        Thread.sleep(10);
      }
      assertTrue(gone(grandchild), "the setsid'd grandchild ended with the group");
      assertFalse(Files.exists(group.folder()), "the group's folder is removed");
    } finally {
      shell.destroyForcibly();
    }
  }

  @Test
  void aGroupWithoutAMemoryRequestHasNoLimit() throws Exception {
    ExecutorCgroups.Group group = groups.create("test-e" + System.nanoTime(), 0);
    try {
      assertEquals(0, group.limitBytes());
      assertFalse(group.oomKilled());
    } finally {
      group.end();
    }
    assertFalse(Files.exists(group.folder()));
  }
}
