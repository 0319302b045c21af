package dev.bulletin.worker.impl;

import dev.bulletin.protocol.Quantities;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.logging.Logger;

/**
 * Memory limits of executors as cgroup v2 groups (docs/environments.md, "Memory requests"):
 * one child group per limited executor under a folder the sysadmin delegated to the worker
 * ({@code BULLETIN_EXECUTOR_CGROUP}: a cgroup v2 folder with the memory controller, holding no
 * process, writable by the worker). The kernel then counts everything the executor's processes
 * charge (heap, page cache, shared memory they fault in) and kills them past {@code memory.max};
 * {@code memory.events} tells that kill from others. Without such a folder, executors limit
 * themselves with RLIMIT_DATA instead (bulletin._runtime._executor.apply_memory_limit).
 */
final class MemoryCgroups {

  private static final Logger LOG = Logger.getLogger(MemoryCgroups.class.getName());
  /** Room above the request for the executor's own start-up and per-call work. */
  static final long HEADROOM_BYTES = 64L << 20;

  private final Path parent;

  private MemoryCgroups(Path parent) {
    this.parent = parent;
  }

  /** The delegated folder from the environment, if it is usable; null: use the fallback. */
  static MemoryCgroups fromEnvironment() {
    String configured = System.getenv("BULLETIN_EXECUTOR_CGROUP");
    if (configured == null || configured.isBlank()) {
      return null;
    }
    try {
      return open(Path.of(configured));
    } catch (IOException e) {
      LOG.warning("BULLETIN_EXECUTOR_CGROUP=" + configured + " cannot hold executors' memory"
          + " limits (" + e.getMessage() + "); executors limit themselves with RLIMIT_DATA");
      return null;
    }
  }

  /** Checks the folder and enables the memory controller for its children. */
  static MemoryCgroups open(Path parent) throws IOException {
    Path controllers = parent.resolve("cgroup.controllers");
    if (!Files.isRegularFile(controllers)) {
      throw new IOException(parent + " is not a cgroup v2 folder (no cgroup.controllers)");
    }
    if (!Files.readString(controllers).contains("memory")) {
      throw new IOException(parent + " has no memory controller (cgroup.controllers: "
          + Files.readString(controllers).strip() + ")");
    }
    Files.writeString(parent.resolve("cgroup.subtree_control"), "+memory");
    return new MemoryCgroups(parent);
  }

  /** A group for one executor, limited to {@code limitBytes} plus headroom, not yet used. */
  Group create(String executorId, long limitBytes) throws IOException {
    Path folder = Files.createDirectories(parent.resolve(executorId));
    Files.writeString(folder.resolve("memory.max"), Long.toString(limitBytes + HEADROOM_BYTES));
    Path swap = folder.resolve("memory.swap.max");
    if (Files.exists(swap)) {
      Files.writeString(swap, "0"); // past its limit it is stopped, not swapped out
    }
    return new Group(folder, limitBytes);
  }

  /** One executor's group. */
  record Group(Path folder, long limitBytes) {

    /** Moves a process into the group (its children follow it). */
    void add(long pid) throws IOException {
      Files.writeString(folder.resolve("cgroup.procs"), Long.toString(pid));
    }

    /** Whether the kernel killed a process of the group for going past memory.max. */
    boolean oomKilled() {
      try {
        for (String line : Files.readAllLines(folder.resolve("memory.events"),
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
    String overLimit() {
      return "went over its memory limit of memory=" + Quantities.formatSize(limitBytes)
          + " (cgroup memory.max) and was killed; ask for more with memory=..., or allocate less";
    }

    /** Removes the group once its processes have exited (a group with processes stays). */
    void remove() {
      try {
        Files.deleteIfExists(folder);
      } catch (IOException e) {
        LOG.fine("cannot remove " + folder + ": " + e.getMessage());
      }
    }
  }
}
