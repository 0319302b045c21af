package dev.bulletin.worker.impl;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.logging.Logger;

/**
 * One cgroup v2 group per executor, so that every process a call starts ends with its executor:
 * a process can leave its parent (double fork), its session ({@code setsid}) and its process
 * group, but not its cgroup, and {@code cgroup.kill} (a core cgroup v2 file, no controller
 * needed) kills every process in a group at once, forks in flight included. A group also holds
 * an executor's memory limit ({@link MemoryCgroups}) when the call asked for one and the memory
 * controller is there.
 *
 * <p>Where the groups are: under the folder the sysadmin delegated
 * ({@code BULLETIN_EXECUTOR_CGROUP}), else under {@code bulletin-<agent pid>}, a folder this
 * agent makes in its own cgroup of the cgroup2 hierarchy (found in /proc/self/mounts and
 * /proc/self/cgroup), which needs the agent to be allowed to write there (root, or a delegated
 * systemd unit). Where neither works ({@link #find} says why), executors fall back to
 * {@link ProcessSweep}.
 */
final class ExecutorCgroups {

  private static final Logger LOG = Logger.getLogger(ExecutorCgroups.class.getName());
  /** How long a killed group may take to empty (a process tearing down a CUDA context). */
  private static final long EMPTY_MILLIS = 10_000;

  private final Path parent;
  /** Whether this agent made {@link #parent} (and removes it when it exits). */
  private final boolean own;
  /** Whether the groups have the memory controller (memory.max). */
  private final boolean memory;
  private final Set<Group> live = ConcurrentHashMap.newKeySet();
  private static final java.util.concurrent.atomic.AtomicLong SEQUENCE =
      new java.util.concurrent.atomic.AtomicLong();

  private ExecutorCgroups(Path parent, boolean own, boolean memory) {
    this.parent = parent;
    this.own = own;
    this.memory = memory;
  }

  /**
   * The groups of this agent's executors, checked by moving a short-lived process into a group
   * and killing it there. A null {@code delegated} (or one that does not work, said in the log)
   * means the agent's own subtree.
   *
   * @throws IOException saying why no group can be had here
   */
  static ExecutorCgroups find(String delegated) throws IOException {
    List<String> refused = new ArrayList<>();
    if (delegated != null && !delegated.isBlank()) {
      try {
        return probed(open(Path.of(delegated), false));
      } catch (IOException e) {
        refused.add("BULLETIN_EXECUTOR_CGROUP=" + delegated + ": " + e.getMessage());
      }
    }
    try {
      Path mine = ownCgroup();
      sweepStale(mine);
      Path subtree = mine.resolve("bulletin-" + ProcessHandle.current().pid());
      try {
        Files.createDirectories(subtree);
      } catch (IOException e) {
        String why = e instanceof java.nio.file.FileSystemException failed
            && failed.getReason() != null ? failed.getReason() : e.getClass().getSimpleName();
        throw new IOException("cannot make " + subtree + " (" + why + "): run the agent as"
            + " root, or delegate a cgroup v2 folder to it in"
            + " BULLETIN_EXECUTOR_CGROUP", e);
      }
      try {
        ExecutorCgroups groups = probed(open(subtree, true));
        Runtime.getRuntime().addShutdownHook(new Thread(groups::close, "bulletin-cgroups"));
        return groups;
      } catch (IOException e) {
        removeQuietly(subtree);
        throw e;
      }
    } catch (IOException | RuntimeException e) {
      refused.add(e.getMessage());
    }
    throw new IOException(String.join("; ", refused));
  }

  /** Checks a folder and enables the memory controller for its groups where it can. */
  static ExecutorCgroups open(Path parent, boolean own) throws IOException {
    if (!Files.isRegularFile(parent.resolve("cgroup.controllers"))) {
      throw new IOException(parent + " is not a cgroup v2 folder (no cgroup.controllers)");
    }
    if (!Files.isWritable(parent)) {
      throw new IOException(parent + " is not writable by this agent");
    }
    return new ExecutorCgroups(parent, own, MemoryCgroups.enable(parent));
  }

  /** The folder the groups are made in. */
  Path parent() {
    return parent;
  }

  /** Whether memory limits are cgroup limits (else RLIMIT_DATA in the executor). */
  boolean limitsMemory() {
    return memory;
  }

  /**
   * A new, empty group for an executor; {@code limitBytes} > 0 and the memory controller:
   * with that memory limit.
   */
  Group create(String executorId, long limitBytes) throws IOException {
    // Agents in one JVM (tests, a runtime's embedded worker) may number executors alike.
    Path folder = parent.resolve(executorId + "-" + SEQUENCE.incrementAndGet());
    Files.createDirectory(folder);
    Group group = new Group(folder, memory && limitBytes > 0 ? limitBytes : 0);
    try {
      if (group.limitBytes() > 0) {
        MemoryCgroups.limit(folder, limitBytes);
      }
    } catch (IOException e) {
      removeQuietly(folder);
      throw e;
    }
    live.add(group);
    return group;
  }

  /** At the agent's exit: kills what is left in its groups and removes the folders it made. */
  void close() {
    new ArrayList<>(live).forEach(Group::end);
    if (own) {
      removeQuietly(parent);
    }
  }

  /** Whether this agent may move a process into a group and kill it there: tried once. */
  private static ExecutorCgroups probed(ExecutorCgroups groups) throws IOException {
    if (!Files.exists(groups.parent.resolve("cgroup.kill"))) {
      throw new IOException(groups.parent + " has no cgroup.kill (Linux 5.14 or later)");
    }
    Group group = groups.create("probe-" + System.nanoTime(), 0);
    Process sleeper = new ProcessBuilder("sleep", "30").start();
    try {
      group.add(sleeper.pid());
      group.end();
      if (!sleeper.waitFor(5, TimeUnit.SECONDS) || Files.exists(group.folder())) {
        throw new IOException("a process killed in " + group.folder() + " did not end");
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IOException("interrupted while trying " + groups.parent, e);
    } finally {
      sleeper.destroyForcibly();
      group.end();
    }
    return groups;
  }

  /** This process's cgroup in the cgroup2 hierarchy: the mount plus its "0::" path. */
  private static Path ownCgroup() throws IOException {
    Path mount = null;
    for (String line : Files.readAllLines(Path.of("/proc/self/mounts"))) {
      String[] fields = line.split(" ");
      if (fields.length > 2 && fields[2].equals("cgroup2")) {
        mount = Path.of(fields[1].replace("\\040", " "));
        break;
      }
    }
    if (mount == null) {
      throw new IOException("no cgroup2 file system is mounted (/proc/self/mounts)");
    }
    for (String line : Files.readAllLines(Path.of("/proc/self/cgroup"))) {
      if (line.startsWith("0::")) {
        Path mine = mount.resolve(line.substring(3).replaceFirst("^/+", ""));
        // Mounted from another root (a container): the path would name someone else's group.
        if (!Files.readString(mine.resolve("cgroup.procs")).lines()
            .anyMatch(pid -> pid.equals(Long.toString(ProcessHandle.current().pid())))) {
          throw new IOException(mine + " does not list this process");
        }
        return mine;
      }
    }
    throw new IOException("this process is in no cgroup2 group (/proc/self/cgroup)");
  }

  /**
   * Kills and removes the subtrees of agents that died without removing theirs (SIGKILL):
   * what their executors' calls left running dies with them. A subtree whose agent's pid is
   * taken again is left, rather than kill what may be another agent's.
   */
  private static void sweepStale(Path mine) {
    try (DirectoryStream<Path> folders = Files.newDirectoryStream(mine, "bulletin-*")) {
      for (Path folder : folders) {
        String pid = folder.getFileName().toString().substring("bulletin-".length());
        if (pid.matches("[0-9]{1,10}") && ProcessHandle.of(Long.parseLong(pid)).isEmpty()
            && Files.isDirectory(folder)) {
          try (DirectoryStream<Path> groups = Files.newDirectoryStream(folder,
              Files::isDirectory)) {
            groups.forEach(ExecutorCgroups::killAndRemove);
          }
          removeQuietly(folder);
          LOG.info("removed " + folder + ", left by an agent that is gone");
        }
      }
    } catch (IOException | RuntimeException e) {
      LOG.fine("cannot look for stale executor groups in " + mine + ": " + e.getMessage());
    }
  }

  /** Kills every process in a group, waits until none is left, and removes the group. */
  private static void killAndRemove(Path folder) {
    if (killAndWait(folder)) {
      removeQuietly(folder);
    }
  }

  /** Kills every process in a group and waits until none is left; false if one outlives it. */
  private static boolean killAndWait(Path folder) {
    kill(folder);
    long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(EMPTY_MILLIS);
    while (populated(folder) && System.nanoTime() < deadline) {
      try {
        Thread.sleep(5);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        break;
      }
    }
    if (populated(folder)) {
      LOG.warning("a process of " + folder + " outlived cgroup.kill for " + EMPTY_MILLIS
          + " ms; the group stays until the agent exits");
      return false;
    }
    return true;
  }

  /** Kills every process in a group at once, without waiting. */
  private static void kill(Path folder) {
    try {
      Files.writeString(folder.resolve("cgroup.kill"), "1");
    } catch (IOException e) {
      LOG.fine("cannot kill " + folder + ": " + e.getMessage()); // removed already
    }
  }

  /** Whether a process is left in a group (false for one that is gone). */
  static boolean populated(Path folder) {
    try {
      return Files.readAllLines(folder.resolve("cgroup.events"), StandardCharsets.US_ASCII)
          .contains("populated 1");
    } catch (IOException e) {
      return false;
    }
  }

  private static void removeQuietly(Path folder) {
    try {
      Files.deleteIfExists(folder);
    } catch (IOException e) {
      LOG.fine("cannot remove " + folder + ": " + e.getMessage());
    }
  }

  /** One executor's group; {@code limitBytes} is its memory.max request, 0 for none. */
  final class Group {
    private final Path folder;
    private final long limitBytes;
    /** Read before the folder goes: a call's death may be told after the group was ended. */
    private volatile boolean oomKilled;

    private Group(Path folder, long limitBytes) {
      this.folder = folder;
      this.limitBytes = limitBytes;
    }

    Path folder() {
      return folder;
    }

    long limitBytes() {
      return limitBytes;
    }

    /** Moves a process into the group (what it starts from then on is in the group too). */
    void add(long pid) throws IOException {
      Files.writeString(folder.resolve("cgroup.procs"), Long.toString(pid));
    }

    /** Kills every process in the group at once, without waiting. */
    void kill() {
      ExecutorCgroups.kill(folder);
    }

    /**
     * Kills every process in the group, waits until none is left, and removes the group. The
     * group stays (and is tried again at the agent's exit) if a process outlives the wait.
     */
    void end() {
      if (Files.isDirectory(folder)) {
        if (!killAndWait(folder)) {
          return;
        }
        oomKilled = oomKilled();
        removeQuietly(folder);
      }
      live.remove(this);
    }

    /** Whether the kernel killed a process of the group for going past memory.max. */
    boolean oomKilled() {
      return oomKilled || limitBytes > 0 && MemoryCgroups.oomKilled(folder);
    }

    /** Words for a call whose executor the limit killed. */
    String overLimit() {
      return MemoryCgroups.overLimit(limitBytes);
    }
  }
}
