package dev.bulletin.worker.impl;

import dev.bulletin.worker.CallListener;
import dev.bulletin.worker.ExecutorSpec;
import dev.bulletin.worker.WorkerOptions;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermission;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * Which interpreter a call's executor runs (docs/environments.md): the caller's own when it
 * exists on this host (the same virtualenv or conda env as the notebook), else the worker's;
 * with {@code pip=[...]}, a cached environment built on top of that one
 * ({@link PipEnvironments}). A call from another Python minor version cannot run here (its
 * function was pickled for its own version): that is an error naming both sides.
 *
 * <p>An interpreter runs under the isolation of the caller's executors (their account), and
 * only when no other account can change it: its file, its environment's folder and that
 * folder's site-packages must belong to root or to the account the executor runs as, and be
 * writable by no group or other user. Else another local user could put code into it that would
 * run as the caller.
 */
final class CallEnvironments {

  private final WorkerOptions options;
  private final PipEnvironments pip;
  /** Python "major.minor" by interpreter path, asked once each. */
  private final Map<Path, String> versions = new ConcurrentHashMap<>();
  private final int agentUid = UnixAccount.currentUid();

  CallEnvironments(WorkerOptions options) {
    this.options = options;
    this.pip = new PipEnvironments(options);
  }

  /** The profile of the executor a call needs; may build an environment (said to listener). */
  ExecutorProfile resolve(ExecutorSpec spec, UnixAccount account, CallListener listener)
      throws ExecutorStartException {
    Path base = options.python();
    Path python = base;
    Path caller = spec.pythonExecutable().isEmpty() ? null : Path.of(spec.pythonExecutable());
    if (caller != null && Files.isExecutable(caller) && !sameFile(caller, base)) {
      checkTrusted(caller, account);
      python = caller;
    }
    if (!spec.pythonVersion().isEmpty()) {
      String here = versionOf(python);
      if (!here.equals(spec.pythonVersion())) {
        throw new ExecutorStartException("the call was made from Python " + spec.pythonVersion()
            + (caller == null ? "" : " (" + caller + ")") + ", but this worker's interpreter "
            + python + " is Python " + here + ": a function pickled by one Python minor version"
            + " does not load in another. Call from Python " + here + ", or start the worker"
            + " with --python naming a Python " + spec.pythonVersion(), null);
      }
    }
    if (spec.needsPackages()) {
      python = pip.ensure(python, spec.pip(), account, listener);
    }
    return new ExecutorProfile(python, spec.memoryBytes(), spec.fingerprint());
  }

  /** The interpreter's "major.minor", asked once. */
  String versionOf(Path python) throws ExecutorStartException {
    String known = versions.get(python);
    if (known != null) {
      return known;
    }
    String version = run(List.of(python.toString(), "-c",
        "import sys; print('%d.%d' % sys.version_info[:2])")).strip();
    if (!version.matches("[0-9]+\\.[0-9]+")) {
      throw new ExecutorStartException("cannot tell the version of the interpreter " + python
          + ": it answered '" + version + "'", null);
    }
    versions.put(python, version);
    return version;
  }

  /**
   * Refuses an interpreter another account could change: see the class comment. The prefix is
   * the folder above bin/ (a venv's or conda env's root).
   */
  void checkTrusted(Path python, UnixAccount account) throws ExecutorStartException {
    int uid = account != null ? account.uid() : agentUid;
    List<Path> checked = new ArrayList<>(List.of(python));
    Path prefix = python.toAbsolutePath().getParent() == null ? null
        : python.toAbsolutePath().getParent().getParent();
    if (prefix != null) {
      checked.add(prefix);
      try (var found = Files.find(prefix, 4, (path, attrs) -> attrs.isDirectory()
          && path.getFileName().toString().equals("site-packages"))) {
        found.forEach(checked::add);
      } catch (IOException | java.io.UncheckedIOException e) {
        throw new ExecutorStartException("cannot inspect the caller's environment " + prefix
            + ": " + e.getMessage(), e);
      }
    }
    for (Path path : checked) {
      String problem = untrusted(path, uid);
      if (problem != null) {
        throw new ExecutorStartException("the caller's interpreter " + python + " is not run"
            + " here: " + path + " " + problem + ", so another account could change the code"
            + " that would run as " + (account != null ? account.name() : "this worker's"
            + " account") + ". Make it belong to that account (or root) and not group- or"
            + " world-writable, or pass pip=[...] instead", null);
      }
    }
  }

  private static String untrusted(Path path, int uid) throws ExecutorStartException {
    try {
      int owner = (Integer) Files.getAttribute(path, "unix:uid", LinkOption.NOFOLLOW_LINKS);
      if (owner != 0 && owner != uid) {
        return "belongs to uid " + owner;
      }
      if (Files.isSymbolicLink(path)) {
        return null; // a link's own mode means nothing; its target is the interpreter itself
      }
      Set<PosixFilePermission> mode = Files.getPosixFilePermissions(path);
      if (mode.contains(PosixFilePermission.GROUP_WRITE)
          || mode.contains(PosixFilePermission.OTHERS_WRITE)) {
        return "is writable by its group or by others";
      }
      return null;
    } catch (IOException | UnsupportedOperationException e) {
      throw new ExecutorStartException("cannot inspect " + path + ": " + e.getMessage(), e);
    }
  }

  private static boolean sameFile(Path a, Path b) {
    try {
      return a.toRealPath().equals(b.toRealPath()) && a.toAbsolutePath().getParent()
          .equals(b.toAbsolutePath().getParent());
    } catch (IOException e) {
      return false;
    }
  }

  /** Runs a short command with the executors' environment; its stdout, or the failure. */
  private static String run(List<String> command) throws ExecutorStartException {
    try {
      ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true);
      builder.environment().clear();
      builder.environment().putAll(ExecutorEnvironment.build(System.getenv(), Map.of(),
          Map.of()));
      Process process = builder.start();
      process.getOutputStream().close();
      String out = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      if (!process.waitFor(30, TimeUnit.SECONDS) || process.exitValue() != 0) {
        process.destroyForcibly();
        throw new ExecutorStartException("'" + String.join(" ", command) + "' failed: " + out,
            null);
      }
      return out;
    } catch (IOException e) {
      throw new ExecutorStartException("cannot run " + command.get(0) + ": " + e.getMessage(),
          e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new ExecutorStartException("interrupted while running " + command.get(0), e);
    }
  }
}
