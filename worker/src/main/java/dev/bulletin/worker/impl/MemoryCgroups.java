package dev.bulletin.worker.impl;

import dev.bulletin.protocol.Quantities;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/**
 * Memory limits of executors as cgroup v2 limits (docs/environments.md, "Memory requests"):
 * the memory files of an executor's group ({@link ExecutorCgroups}), written only when its call
 * asked for {@code memory=} and the memory controller is there. The kernel then counts
 * everything the executor's processes charge (heap, page cache, shared memory they fault in) and
 * kills them past {@code memory.max}; {@code memory.events} tells that kill from others. Without
 * the controller, executors limit themselves with RLIMIT_DATA instead
 * (bulletin._runtime._executor.apply_memory_limit).
 */
final class MemoryCgroups {

  /** Room above the request for the executor's own start-up and per-call work. */
  static final long HEADROOM_BYTES = 64L << 20;

  private MemoryCgroups() {}

  /**
   * Enables the memory controller for the groups under {@code parent} where its parent offers
   * it; false where it does not (a host whose memory controller is on cgroup v1).
   */
  static boolean enable(Path parent) throws IOException {
    if (!List.of(Files.readString(parent.resolve("cgroup.controllers")).strip().split(" "))
        .contains("memory")) {
      return false;
    }
    Files.writeString(parent.resolve("cgroup.subtree_control"), "+memory");
    return true;
  }

  /** Limits a group to {@code limitBytes} plus headroom, without swap. */
  static void limit(Path group, long limitBytes) throws IOException {
    Files.writeString(group.resolve("memory.max"), Long.toString(limitBytes + HEADROOM_BYTES));
    Path swap = group.resolve("memory.swap.max");
    if (Files.exists(swap)) {
      Files.writeString(swap, "0"); // past its limit it is stopped, not swapped out
    }
  }

  /** Whether the kernel killed a process of the group for going past memory.max. */
  static boolean oomKilled(Path group) {
    try {
      for (String line : Files.readAllLines(group.resolve("memory.events"),
          StandardCharsets.US_ASCII)) {
        String[] parts = line.split(" ");
        if (parts.length == 2 && parts[0].equals("oom_kill") && !parts[1].equals("0")) {
          return true;
        }
      }
    } catch (IOException | RuntimeException e) {
      return false;
    }
    return false;
  }

  /** Words for a call whose executor the limit killed; the client reads "memory limit". */
  static String overLimit(long limitBytes) {
    return "went over its memory limit of memory=" + Quantities.formatSize(limitBytes)
        + " (cgroup memory.max) and was killed; ask for more with memory=..., or allocate less";
  }
}
