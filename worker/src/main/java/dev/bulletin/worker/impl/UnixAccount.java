package dev.bulletin.worker.impl;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A Unix account a user's executors run as ({@code users[].run_as}). Java has no API for an
 * account's uid and gid by name, hence {@code getent passwd}; the executor is started through
 * {@code setpriv} (util-linux), which needs the agent to run as root.
 */
record UnixAccount(String name, int uid, int gid, Path home) {

  /** Looks an account up; fails, naming it, when the system does not know it. */
  static UnixAccount lookup(String name) throws ExecutorStartException {
    String line;
    try {
      Process getent = new ProcessBuilder("getent", "passwd", name).redirectErrorStream(true)
          .start();
      line = new String(getent.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
      if (!getent.waitFor(10, TimeUnit.SECONDS) || getent.exitValue() != 0) {
        throw new ExecutorStartException("users[].run_as names the Unix account '" + name
            + "', which this machine does not know (getent passwd " + name + ": "
            + (line.isEmpty() ? "no entry" : line) + "); create it, or fix the config", null);
      }
    } catch (IOException e) {
      throw new ExecutorStartException("cannot look up the Unix account '" + name
          + "' (getent): " + e.getMessage(), e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new ExecutorStartException("interrupted while looking up account " + name, e);
    }
    String[] fields = line.split(":", -1);
    try {
      return new UnixAccount(name, Integer.parseInt(fields[2]), Integer.parseInt(fields[3]),
          Path.of(fields[5]));
    } catch (RuntimeException e) {
      throw new ExecutorStartException("getent passwd " + name + " answered an entry this agent"
          + " cannot read: " + line, e);
    }
  }

  /** Whether this process runs as root, and so may start processes as other accounts. */
  static boolean processIsRoot() {
    return currentUid() == 0;
  }

  /** This process's uid, or -1 when it cannot be told. */
  static int currentUid() {
    return dev.bulletin.bridge.UserFolder.currentUid();
  }

  /** The command that runs {@code command} as this account, with its groups and no way up. */
  List<String> wrap(List<String> command) {
    List<String> wrapped = new java.util.ArrayList<>(List.of("setpriv", "--reuid=" + uid,
        "--regid=" + gid, "--init-groups", "--no-new-privs", "--"));
    wrapped.addAll(command);
    return wrapped;
  }

  /** Where its executors start: its home when there is one, else the root folder. */
  Path workingDirectory() {
    return Files.isDirectory(home) ? home : Path.of("/");
  }
}
