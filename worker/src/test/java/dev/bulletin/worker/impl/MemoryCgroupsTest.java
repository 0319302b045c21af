package dev.bulletin.worker.impl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * What the worker writes into a delegated cgroup v2 folder, on a folder laid out like one
 * (this machine's cgroup2 hierarchy has no memory controller, so the kernel's side is not
 * exercised here: docs/environments.md says so).
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
  void aLimitedExecutorsGroupHoldsItsLimitAndItsProcess() throws Exception {
    MemoryCgroups cgroups = MemoryCgroups.open(delegated("cpu io memory pids"));
    assertEquals("+memory", Files.readString(folder.resolve("cgroup.subtree_control")));
    MemoryCgroups.Group group = cgroups.create("w-e7", 256L << 20);
    assertEquals(Long.toString((256L << 20) + MemoryCgroups.HEADROOM_BYTES),
        Files.readString(folder.resolve("w-e7/memory.max")));
    group.add(4242);
    assertEquals("4242", Files.readString(folder.resolve("w-e7/cgroup.procs")));
  }

  @Test
  void anOutOfMemoryKillIsToldFromOtherDeaths() throws Exception {
    MemoryCgroups.Group group = MemoryCgroups.open(delegated("memory")).create("w-e1", 256L << 20);
    Path events = folder.resolve("w-e1/memory.events");
    Files.writeString(events, "low 0\nhigh 0\nmax 3\noom 1\noom_kill 0\n");
    assertFalse(group.oomKilled());
    Files.writeString(events, "low 0\nhigh 0\nmax 9\noom 1\noom_kill 1\n");
    assertTrue(group.oomKilled());
    assertTrue(group.overLimit().contains("went over its memory limit of memory=256MiB"),
        group.overLimit());
  }

  @Test
  void aFolderWithoutTheMemoryControllerIsRefused() throws Exception {
    IOException refused = assertThrows(IOException.class,
        () -> MemoryCgroups.open(delegated("cpu pids")));
    assertTrue(refused.getMessage().contains("has no memory controller"), refused.getMessage());
    IOException notCgroup = assertThrows(IOException.class,
        () -> MemoryCgroups.open(folder.resolve("missing")));
    assertTrue(notCgroup.getMessage().contains("not a cgroup v2 folder"), notCgroup.getMessage());
  }
}
