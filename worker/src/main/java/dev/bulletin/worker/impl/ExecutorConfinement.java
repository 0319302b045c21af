package dev.bulletin.worker.impl;

import java.io.IOException;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.logging.Logger;

/**
 * What holds one executor's processes and scratch space, so that they end with it
 * (docs/security.md, "Executor confinement"): its cgroup v2 group ({@link ExecutorCgroups}),
 * or, where this agent can have none, a sweep of its session and descendants
 * ({@link ProcessSweep}); its memory limit (the group's memory.max, else RLIMIT_DATA in the
 * executor); and its private /tmp or TMPDIR ({@link ExecutorScratch}). Which mechanism holds
 * the processes is chosen once per agent and said in its log.
 */
final class ExecutorConfinement {

  private static final Logger LOG = Logger.getLogger(ExecutorConfinement.class.getName());
  /** This agent's executor groups, or null: the sweep. */
  private static final ExecutorCgroups CGROUPS = findCgroups();

  static {
    ExecutorScratch.namespacesWork(); // tried (and said in the log) once, at the first start
    ExecutorScratch.removeStale();
  }

  private final String id;
  private final UnixAccount account;
  private final long memoryBytes;
  /** The executor's group, or null: the sweep. */
  private final ExecutorCgroups.Group group;
  private final ExecutorScratch scratch;
  private final AtomicBoolean ended = new AtomicBoolean();
  private volatile Process process;

  private ExecutorConfinement(String id, UnixAccount account, long memoryBytes,
      ExecutorCgroups.Group group, ExecutorScratch scratch) {
    this.id = id;
    this.account = account;
    this.memoryBytes = memoryBytes;
    this.group = group;
    this.scratch = scratch;
  }

  /**
   * Makes a new executor's group and scratch, before its process starts.
   *
   * @param needed the folders the executor needs (see {@link ExecutorScratch#prepare})
   */
  static ExecutorConfinement prepare(String id, UnixAccount account, ExecutorProfile profile,
      List<Path> needed) throws ExecutorStartException {
    ExecutorCgroups.Group group = null;
    try {
      if (CGROUPS != null) {
        group = CGROUPS.create(id, profile.memoryBytes());
      }
      return new ExecutorConfinement(id, account, profile.memoryBytes(), group,
          ExecutorScratch.prepare(id, account, needed));
    } catch (IOException e) {
      if (group != null) {
        group.end();
      }
      throw new ExecutorStartException("cannot prepare the cgroup or scratch folder of executor "
          + id + ": " + e.getMessage(), e);
    }
  }

  /** The command that starts the executor: through its private /tmp's namespace, if any. */
  List<String> command(List<String> python) {
    return scratch.wrap(account == null ? python : account.wrap(python));
  }

  /** What the executor's environment gets from its confinement. */
  Map<String, String> environment() {
    Map<String, String> env = new HashMap<>(scratch.environment());
    if (memoryBytes > 0 && (group == null || group.limitBytes() == 0)) {
      // The executor limits itself once its own imports are done (docs/environments.md).
      env.put("BULLETIN_MEMORY_LIMIT_BYTES", Long.toString(memoryBytes));
    }
    return env;
  }

  /**
   * Puts the started process in its group, before it has read its token (so before any call
   * runs), and ends the rest of its processes when it exits.
   */
  void hold(Process started) throws IOException {
    process = started;
    if (group != null) {
      group.add(started.pid());
    }
    started.onExit().thenRunAsync(this::end);
  }

  /**
   * Kills every process of the executor now, without waiting for them to go; {@link #end}
   * then waits and cleans up.
   */
  void kill() {
    Process started = process;
    if (group != null) {
      group.kill();
      if (started != null) {
        started.destroyForcibly();
      }
      return;
    }
    // The sweep reads /proc: off the caller's thread (a stop can come from an event loop).
    // The executor goes last: while it lives, its children keep it as their parent.
    CompletableFuture.runAsync(() -> {
      sweep();
      if (started != null) {
        started.destroyForcibly();
      }
    });
  }

  /**
   * Kills every process of the executor, waits until they are gone, and removes its group
   * and scratch. Once; later calls return at once.
   */
  void end() {
    if (!ended.compareAndSet(false, true)) {
      return;
    }
    if (group != null) {
      group.end();
    } else {
      sweep();
    }
    Process started = process;
    if (started != null) {
      started.destroyForcibly();
      try {
        started.waitFor(5, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    scratch.remove();
  }

  private void sweep() {
    Process started = process;
    if (started != null) {
      ProcessSweep.end(started.pid(), started.isAlive(), account == null ? -1 : account.uid());
    }
  }

  /** Whether the kernel killed the executor for going past its group's memory.max. */
  boolean oomKilled() {
    return group != null && group.oomKilled();
  }

  /** Whether the executor limits its own memory (RLIMIT_DATA), not its group. */
  boolean selfLimited() {
    return memoryBytes > 0 && (group == null || group.limitBytes() == 0);
  }

  /** Words for a call whose executor its group's memory limit killed. */
  String overLimit() {
    return group == null ? "" : group.overLimit();
  }

  private static ExecutorCgroups findCgroups() {
    try {
      ExecutorCgroups found = ExecutorCgroups.find(System.getenv("BULLETIN_EXECUTOR_CGROUP"));
      LOG.info("each executor runs in a cgroup of its own under " + found.parent()
          + " (cgroup.kill ends all of its processes when it retires); memory limits: "
          + (found.limitsMemory() ? "memory.max" : "RLIMIT_DATA (no memory controller there)"));
      return found;
    } catch (IOException e) {
      LOG.warning("executors run without a cgroup of their own (" + e.getMessage() + "):"
          + " when one retires, its session and its descendants are killed instead, which"
          + " misses a process that double-forked and called setsid (docs/security.md)");
      return null;
    }
  }
}
