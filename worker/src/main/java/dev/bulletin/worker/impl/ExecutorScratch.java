package dev.bulletin.worker.impl;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.logging.Logger;

/**
 * An executor's private scratch space, gone when the executor ends.
 *
 * <p>An executor that runs as a {@code run_as} account (the agent is root) starts in a mount
 * namespace of its own whose /tmp is a new tmpfs owned by that account, mode 0700: what one
 * user's call writes to /tmp no other user's call can see, and the tmpfs goes with the last
 * process of the namespace (the executor's cgroup kill ends them all). The host's /tmp is not
 * visible there, except the folders under it that the executor itself needs (the store, its
 * interpreter's prefix, its working directory, its PYTHONPATH), which are bound through at
 * their own paths.
 *
 * <p>Other executors (the agent's own account, or where no mount namespace can be made) get
 * TMPDIR, TEMP and TMP set to a folder of their own, mode 0700, in the system's temp folder,
 * removed when the executor ends. They share the account of other users' executors (run_as is
 * not in use), so a namespace would separate nothing that the account could not reach anyway
 * (/proc/[pid]/root), and a private /tmp would hide the files a single-user cluster's calls
 * are given by path.
 */
final class ExecutorScratch {

  private static final Logger LOG = Logger.getLogger(ExecutorScratch.class.getName());
  private static final Path TMP = Path.of("/tmp");
  /**
   * Run by {@code sh} as root inside the new namespace, before privileges are dropped:
   * mounts the tmpfs on the staging folder, binds the needed folders of the host's /tmp into
   * it, moves it onto /tmp and runs the rest of the command. Arguments: the staging folder,
   * the tmpfs options, the folders to bind, "--", the command.
   */
  private static final String SCRIPT = "set -e; stage=$1; options=$2; shift 2; "
      + "mount -t tmpfs -o \"$options\" bulletin-tmp \"$stage\"; "
      + "while [ \"$1\" != -- ]; do mkdir -p \"$stage${1#/tmp}\"; "
      + "mount --bind \"$1\" \"$stage${1#/tmp}\"; shift; done; shift; "
      + "mount --move \"$stage\" /tmp; exec \"$@\"";
  private static volatile Boolean namespaces;
  /** Scratch folders are named {@code bulletin-scratch-<agent pid>-<executor id>-<random>}. */
  private static final String PREFIX = "bulletin-scratch-";
  private static final long AGENT = ProcessHandle.current().pid();

  /** The folder: TMPDIR, or where the namespace's tmpfs was staged (root's, empty). */
  private final Path folder;
  private final boolean privateTmp;
  private final List<Path> through;
  private final UnixAccount account;

  private ExecutorScratch(Path folder, boolean privateTmp, List<Path> through,
      UnixAccount account) {
    this.folder = folder;
    this.privateTmp = privateTmp;
    this.through = through;
    this.account = account;
  }

  /**
   * Scratch for a new executor.
   *
   * @param needed folders the executor reads or writes (store, interpreter prefix, working
   *     directory, PYTHONPATH entries): those under /tmp stay visible in a private /tmp
   */
  static ExecutorScratch prepare(String id, UnixAccount account, List<Path> needed)
      throws IOException {
    Path base = Path.of(System.getProperty("java.io.tmpdir"));
    boolean privateTmp = account != null && namespacesWork();
    Path folder = Files.createTempDirectory(privateTmp ? TMP : base,
        PREFIX + AGENT + "-" + id + "-",
        PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
    if (account != null && !privateTmp) {
      Files.setAttribute(folder, "unix:gid", account.gid());
      Files.setAttribute(folder, "unix:uid", account.uid());
    }
    return new ExecutorScratch(folder, privateTmp, privateTmp ? underTmp(needed) : List.of(),
        account);
  }

  /** Whether the executor gets a private /tmp (else a TMPDIR folder). */
  boolean privateTmp() {
    return privateTmp;
  }

  /** The command that starts {@code command} (as root) with the private /tmp, if it has one. */
  List<String> wrap(List<String> command) {
    if (!privateTmp) {
      return command;
    }
    List<String> wrapped = new ArrayList<>(List.of("unshare", "--mount", "--propagation",
        "private", "--", "sh", "-c", SCRIPT, "sh", folder.toString(),
        "mode=0700,nosuid,nodev,uid=" + account.uid() + ",gid=" + account.gid()));
    through.forEach(path -> wrapped.add(path.toString()));
    wrapped.add("--");
    wrapped.addAll(command);
    return wrapped;
  }

  /** TMPDIR, TEMP and TMP for the executor's environment. */
  Map<String, String> environment() {
    String tmp = privateTmp ? TMP.toString() : folder.toString();
    return Map.of("TMPDIR", tmp, "TEMP", tmp, "TMP", tmp);
  }

  /**
   * Removes the folder, once the executor's processes are gone. A TMPDIR folder may hold what
   * the account put there (links included): removed through descriptors that follow no link.
   */
  void remove() {
    dev.bulletin.bridge.UserFolder.deleteTree(folder);
  }

  /**
   * Removes the scratch folders of agents that are gone (killed: they could not remove their
   * own); a folder whose agent's pid runs again is left, rather than take another agent's.
   */
  static void removeStale() {
    for (Path base : new java.util.LinkedHashSet<>(List.of(TMP,
        Path.of(System.getProperty("java.io.tmpdir"))))) {
      try (java.nio.file.DirectoryStream<Path> folders = Files.newDirectoryStream(base,
          PREFIX + "*")) {
        for (Path folder : folders) {
          String[] parts = folder.getFileName().toString().substring(PREFIX.length())
              .split("-", 2);
          if (parts[0].matches("[0-9]{1,10}") && Long.parseLong(parts[0]) != AGENT
              && ProcessHandle.of(Long.parseLong(parts[0])).isEmpty()) {
            dev.bulletin.bridge.UserFolder.deleteTree(folder);
          }
        }
      } catch (IOException | RuntimeException e) {
        LOG.fine("cannot look for stale scratch folders in " + base + ": " + e.getMessage());
      }
    }
  }

  /** The needed folders under /tmp (not /tmp itself), outermost only. */
  static List<Path> underTmp(List<Path> needed) {
    Set<Path> found = new LinkedHashSet<>();
    for (Path path : needed) {
      Path normal = path.toAbsolutePath().normalize();
      if (normal.startsWith(TMP) && !normal.equals(TMP) && Files.isDirectory(normal)) {
        found.add(normal);
      }
    }
    return found.stream().filter(path -> found.stream()
        .noneMatch(other -> !other.equals(path) && path.startsWith(other))).toList();
  }

  /**
   * Whether this agent can give executors a private /tmp: it is root and a tmpfs mounted in a
   * new mount namespace works here (a container may refuse it). Tried once; said in the log.
   */
  static boolean namespacesWork() {
    Boolean known = namespaces;
    if (known != null) {
      return known;
    }
    synchronized (ExecutorScratch.class) {
      if (namespaces == null) {
        String refused = probe();
        namespaces = refused == null;
        LOG.info(refused == null ? "executors of run_as accounts get a private /tmp (a tmpfs"
            + " in a mount namespace of their own); others a TMPDIR folder of their own"
            : "executors get a TMPDIR folder of their own, not a private /tmp: " + refused);
      }
      return namespaces;
    }
  }

  private static String probe() {
    if (!UnixAccount.processIsRoot()) {
      return "the agent does not run as root";
    }
    try {
      Process probe = new ProcessBuilder("unshare", "--mount", "--propagation", "private",
          "--", "mount", "-t", "tmpfs", "-o", "mode=0700", "bulletin-probe", "/tmp")
          .redirectErrorStream(true).start();
      String output = new String(probe.getInputStream().readAllBytes()).strip();
      if (!probe.waitFor(10, TimeUnit.SECONDS) || probe.exitValue() != 0) {
        probe.destroyForcibly();
        return "a tmpfs in a new mount namespace is refused here (unshare --mount: " + output
            + ")";
      }
      return null;
    } catch (IOException e) {
      return "cannot run unshare (util-linux): " + e.getMessage();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return "interrupted";
    }
  }
}
