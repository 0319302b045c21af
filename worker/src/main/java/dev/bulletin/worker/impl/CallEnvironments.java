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
import java.util.logging.Logger;

/**
 * Which interpreter a call's executor runs (docs/environments.md): the caller's own when it
 * exists on this host (the same virtualenv or conda env as the notebook), else the worker's;
 * with {@code pip=[...]}, a cached environment built on top of that one
 * ({@link PipEnvironments}). A call from another Python minor version cannot run here (its
 * function was pickled for its own version): that is an error naming both sides.
 *
 * <p>A caller's interpreter runs under the isolation of the caller's executors (their account),
 * and only when no other account can change it (its file, its environment's folder and that
 * folder's site-packages belong to root or to the account the executor runs as, and no group or
 * other user may write them: else another local user could put code into it that would run as
 * the caller) and when that account can run it with the bulletin package. Otherwise the call
 * runs in the worker's interpreter, and its output says why (once per interpreter and account).
 */
final class CallEnvironments {

  private static final Logger LOG = Logger.getLogger(CallEnvironments.class.getName());

  private final WorkerOptions options;
  private final PipEnvironments pip;
  /** Python "major.minor" by interpreter path, asked once each. */
  private final Map<Path, String> versions = new ConcurrentHashMap<>();
  /** Why a caller's interpreter is not used, by interpreter and uid ("" when it is used). */
  private final Map<String, String> refusals = new ConcurrentHashMap<>();
  private final Set<String> told = ConcurrentHashMap.newKeySet();
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
      String refusal = refusal(caller, account);
      if (refusal.isEmpty()) {
        python = caller;
      } else if (told.add(caller + "\0" + uid(account))) {
        String notice = "[bulletin] your interpreter " + caller + " is not used on this worker: "
            + refusal + "; the call runs in the worker's interpreter " + base + "\n";
        LOG.warning(notice.strip());
        listener.started("preparing"); // the call's output is shown from here on
        listener.output(true, notice.getBytes(StandardCharsets.UTF_8));
      }
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
    return new ExecutorProfile(python, spec.memoryBytes(), spec.fingerprint(),
        spec.gpuFraction());
  }

  /** The interpreter's "major.minor", asked once. */
  String versionOf(Path python) throws ExecutorStartException {
    String known = versions.get(python);
    if (known != null) {
      return known;
    }
    String version = run(null, List.of(python.toString(), "-c",
        "import sys; print('%d.%d' % sys.version_info[:2])")).strip();
    if (!version.matches("[0-9]+\\.[0-9]+")) {
      throw new ExecutorStartException("cannot tell the version of the interpreter " + python
          + ": it answered '" + version + "'", null);
    }
    versions.put(python, version);
    return version;
  }

  /** Why the caller's interpreter may not run as this account, "" when it may; asked once. */
  String refusal(Path python, UnixAccount account) {
    return refusals.computeIfAbsent(python + "\0" + uid(account), key -> {
      String untrusted = untrusted(python, uid(account));
      if (untrusted != null) {
        return untrusted + ", so another account could change the code that would run as "
            + (account != null ? account.name() : "this worker's account") + " (make it belong"
            + " to that account or root and not group- or world-writable)";
      }
      try {
        run(account, List.of(python.toString(), "-c", "import bulletin._runtime._executor"));
        return "";
      } catch (ExecutorStartException e) {
        return (account != null ? "account " + account.name() : "this worker's account")
            + " cannot run it with the bulletin package (" + e.getMessage().strip() + ")";
      }
    });
  }

  private int uid(UnixAccount account) {
    return account != null ? account.uid() : agentUid;
  }

  /**
   * What makes an interpreter untrusted (see the class comment), or null. The prefix is the
   * folder above bin/ (a venv's or conda env's root).
   */
  static String untrusted(Path python, int uid) {
    List<Path> checked = new ArrayList<>(List.of(python));
    Path parent = python.toAbsolutePath().getParent();
    Path prefix = parent == null ? null : parent.getParent();
    if (prefix != null) {
      checked.add(prefix);
      try (var found = Files.find(prefix, 4, (path, attrs) -> attrs.isDirectory()
          && path.getFileName().toString().equals("site-packages"))) {
        found.forEach(checked::add);
      } catch (IOException | java.io.UncheckedIOException e) {
        return "its environment " + prefix + " cannot be inspected (" + e.getMessage() + ")";
      }
    }
    for (Path path : checked) {
      try {
        int owner = (Integer) Files.getAttribute(path, "unix:uid", LinkOption.NOFOLLOW_LINKS);
        if (owner != 0 && owner != uid) {
          return path + " belongs to uid " + owner;
        }
        Set<PosixFilePermission> mode = Files.getPosixFilePermissions(path,
            LinkOption.NOFOLLOW_LINKS);
        if (!Files.isSymbolicLink(path) && (mode.contains(PosixFilePermission.GROUP_WRITE)
            || mode.contains(PosixFilePermission.OTHERS_WRITE))) {
          return path + " is writable by its group or by others";
        }
      } catch (IOException | UnsupportedOperationException e) {
        return path + " cannot be inspected (" + e.getMessage() + ")";
      }
    }
    return null;
  }

  private static boolean sameFile(Path a, Path b) {
    try {
      return a.toRealPath().equals(b.toRealPath()) && a.toAbsolutePath().getParent()
          .equals(b.toAbsolutePath().getParent());
    } catch (IOException e) {
      return false;
    }
  }

  /**
   * Runs a short command as the account (null: the worker's), with the executors' environment
   * and the configured extra variables; its output, or the failure with it.
   */
  private String run(UnixAccount account, List<String> command) throws ExecutorStartException {
    try {
      ProcessBuilder builder = new ProcessBuilder(account == null ? command
          : account.wrap(command)).redirectErrorStream(true);
      if (account != null) {
        builder.directory(account.workingDirectory().toFile());
      }
      builder.environment().clear();
      builder.environment().putAll(ExecutorEnvironment.build(System.getenv(),
          options.extraEnvironment(), Map.of()));
      Process process = builder.start();
      process.getOutputStream().close();
      String out = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      if (!process.waitFor(30, TimeUnit.SECONDS) || process.exitValue() != 0) {
        process.destroyForcibly();
        throw new ExecutorStartException("'" + String.join(" ", command) + "' failed: "
            + out.strip().lines().reduce((first, last) -> last).orElse(""), null);
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
