package dev.bulletin.worker.impl;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.logging.Logger;

/**
 * Ends an executor's processes where no cgroup can be had ({@link ExecutorCgroups}): the
 * executor is a session leader (it calls setsid at start), so its processes are those of its
 * session and its descendants by parent pid. The sweep stops them (SIGSTOP: a stopped process
 * forks no more, and its children keep it as their parent), walks /proc again until it finds no
 * process it has not stopped, then kills them all (SIGKILL). Processes of another account are
 * never signalled when the executor runs as a run_as account.
 *
 * <p>What it misses (docs/security.md): a process that left the session (setsid) and whose
 * parent exited before the sweep, so that it was handed to init: a double fork plus setsid.
 * Only a cgroup holds those.
 */
final class ProcessSweep {

  private static final Logger LOG = Logger.getLogger(ProcessSweep.class.getName());
  /** Passes at most: each finds the children forked before the previous one stopped them. */
  private static final int PASSES = 50;

  private ProcessSweep() {}

  /** A process as /proc/[pid]/stat tells it. */
  record Stat(long pid, long ppid, long session, int uid) {}

  /**
   * Stops and kills the executor {@code leader} and every process of its session and below it.
   *
   * @param leaderAlive whether the leader still runs: if it exited, its pid may be another
   *     process's by now and is not signalled (its session members keep the id reserved)
   * @param uid the executor's account, or -1 for any (the agent's own)
   * @return the processes killed
   */
  static Set<Long> end(long leader, boolean leaderAlive, int uid) {
    Set<Long> stopped = new HashSet<>();
    for (int pass = 0; pass < PASSES; pass++) {
      Set<Long> found = members(leader, leaderAlive, uid, snapshot());
      found.removeAll(stopped);
      if (found.isEmpty()) {
        break;
      }
      signal("-STOP", found);
      stopped.addAll(found);
    }
    signal("-KILL", stopped);
    return stopped;
  }

  /**
   * The executor's processes in a snapshot of /proc: the leader, its session (if it leads one)
   * and the descendants of both; of the account {@code uid} only, where given.
   */
  static Set<Long> members(long leader, boolean leaderAlive, int uid, Map<Long, Stat> all) {
    Stat head = all.get(leader);
    // A dead leader's pid is not given to another process while its session has members: a
    // process with that pid means the session is gone (and the process is someone else's).
    boolean leads = leaderAlive ? head != null && head.session() == leader : head == null;
    Set<Long> found = new HashSet<>();
    if (leaderAlive && head != null) {
      found.add(leader);
    }
    if (leads) {
      all.values().stream().filter(s -> s.session() == leader && s.pid() != leader)
          .forEach(s -> found.add(s.pid()));
    }
    Map<Long, List<Long>> children = new HashMap<>();
    all.values().forEach(s -> children.computeIfAbsent(s.ppid(), k -> new ArrayList<>())
        .add(s.pid()));
    List<Long> queue = new ArrayList<>(found);
    while (!queue.isEmpty()) {
      for (long child : children.getOrDefault(queue.remove(queue.size() - 1), List.of())) {
        if (found.add(child)) {
          queue.add(child);
        }
      }
    }
    long self = ProcessHandle.current().pid();
    found.removeIf(pid -> pid == self || pid <= 1
        || uid >= 0 && all.containsKey(pid) && all.get(pid).uid() != uid);
    return found;
  }

  /** Every process in /proc now (those that exit while it is read are left out). */
  static Map<Long, Stat> snapshot() {
    Map<Long, Stat> all = new HashMap<>();
    try (DirectoryStream<Path> entries = Files.newDirectoryStream(Path.of("/proc"),
        entry -> entry.getFileName().toString().matches("[0-9]+"))) {
      for (Path entry : entries) {
        Stat stat = read(entry);
        if (stat != null) {
          all.put(stat.pid(), stat);
        }
      }
    } catch (IOException e) {
      LOG.warning("cannot list /proc to end an executor's processes: " + e.getMessage());
    }
    return all;
  }

  private static Stat read(Path entry) {
    try {
      String text = Files.readString(entry.resolve("stat"));
      // The command name is in parentheses and may hold spaces and parentheses itself.
      String[] fields = text.substring(text.lastIndexOf(')') + 2).split(" ");
      int uid = (Integer) Files.getAttribute(entry, "unix:uid");
      return new Stat(Long.parseLong(entry.getFileName().toString()), Long.parseLong(fields[1]),
          Long.parseLong(fields[3]), uid);
    } catch (IOException | RuntimeException e) {
      return null; // exited meanwhile
    }
  }

  /** Java signals only its own children, and only TERM and KILL: hence kill(1). */
  private static void signal(String signal, Set<Long> pids) {
    if (pids.isEmpty()) {
      return;
    }
    List<String> command = new ArrayList<>(List.of("kill", signal, "--"));
    pids.forEach(pid -> command.add(Long.toString(pid)));
    try {
      new ProcessBuilder(command).redirectErrorStream(true)
          .redirectOutput(ProcessBuilder.Redirect.DISCARD).start().waitFor();
    } catch (IOException e) {
      LOG.warning("cannot signal an executor's processes (kill " + signal + "): "
          + e.getMessage());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
