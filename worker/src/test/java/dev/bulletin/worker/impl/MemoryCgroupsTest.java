package dev.bulletin.worker.impl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * What the worker writes into an executor's cgroup v2 group for a memory limit, on folders laid
 * out like cgroups (this machine's cgroup2 hierarchy has no memory controller, so the kernel's
 * side is not exercised here: docs/environments.md says so). ExecutorCgroupsTest runs the
 * groups themselves against the kernel.
 */
class MemoryCgroupsTest {

  @TempDir
  Path folder;

  private Path delegated(String controllers) throws IOException {
    Files.writeString(folder.resolve("cgroup.controllers"), controllers + "\n");
    Files.writeString(folder.resolve("cgroup.subtree_control"), "");
    return folder;
  }

  @Test
  void aLimitedExecutorsGroupHoldsItsLimit() throws Exception {
    assertTrue(MemoryCgroups.enable(delegated("cpu io memory pids")));
    assertEquals("+memory", Files.readString(folder.resolve("cgroup.subtree_control")));
    Path group = Files.createDirectory(folder.resolve("w-e7"));
    Files.writeString(group.resolve("memory.swap.max"), "max");
    MemoryCgroups.limit(group, 256L << 20);
    assertEquals(Long.toString((256L << 20) + MemoryCgroups.HEADROOM_BYTES),
        Files.readString(group.resolve("memory.max")));
    assertEquals("0", Files.readString(group.resolve("memory.swap.max")));
  }

  @Test
  void anOutOfMemoryKillIsToldFromOtherDeaths() throws Exception {
    Path group = Files.createDirectory(folder.resolve("w-e1"));
    Path events = group.resolve("memory.events");
    Files.writeString(events, "low 0\nhigh 0\nmax 3\noom 1\noom_kill 0\n");
    assertFalse(MemoryCgroups.oomKilled(group));
    Files.writeString(events, "low 0\nhigh 0\nmax 9\noom 1\noom_kill 1\n");
    assertTrue(MemoryCgroups.oomKilled(group));
    String words = MemoryCgroups.overLimit(256L << 20);
    assertTrue(words.contains("went over its memory limit of memory=256MiB"), words);
  }

  @Test
  void aFolderWithoutTheMemoryControllerLeavesLimitsToTheExecutor() throws Exception {
    assertFalse(MemoryCgroups.enable(delegated("cpu pids")));
    assertEquals("", Files.readString(folder.resolve("cgroup.subtree_control")));
  }
}
