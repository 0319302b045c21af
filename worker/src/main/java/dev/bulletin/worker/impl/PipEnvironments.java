package dev.bulletin.worker.impl;

import dev.bulletin.worker.CallListener;
import dev.bulletin.worker.WorkerOptions;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * Environments built for {@code pip=[...]} and cached by fingerprint (the interpreter and the
 * pip entries): a venv on top of an interpreter whose site-packages it shares (a .pth file), so
 * only what the call adds is installed. Built on the first call that needs it, reused by every
 * later one; its pip output is the call's output while it builds.
 *
 * <p>Who can change an environment: each account has its own cache folder (mode 0700, owned by
 * it), and an environment for a run_as account is built by that account (pip runs the code of
 * the packages it installs), so one user's build never runs as, or lands in the environments
 * of, another account. Users whose executors share the worker's own account share its folder,
 * as they share everything else (docs/environments.md).
 */
final class PipEnvironments {

  private static final String READY = ".bulletin-ready";
  private static final long BUILD_MINUTES = 15;

  private final Path root;
  private final int agentUid = UnixAccount.currentUid();
  private final Map<Path, Object> locks = new ConcurrentHashMap<>();

  PipEnvironments(WorkerOptions options) {
    String configured = System.getenv("BULLETIN_ENV_CACHE");
    // A worker running as root builds for run_as accounts, which cannot enter root's home.
    this.root = configured != null && !configured.isBlank() ? Path.of(configured)
        : agentUid == 0 ? Path.of("/var/cache/bulletin/envs")
        : Path.of(System.getProperty("user.home"), ".cache", "bulletin", "envs");
  }

  /** The interpreter of the environment for these pip entries on top of {@code base}. */
  Path ensure(Path base, List<String> pip, UnixAccount account, CallListener listener)
      throws ExecutorStartException {
    Path folder = accountFolder(account).resolve(key(base, pip));
    Path python = folder.resolve("bin").resolve("python");
    synchronized (locks.computeIfAbsent(folder, ignored -> new Object())) {
      if (Files.exists(folder.resolve(READY))) {
        return python;
      }
      listener.started("environment-build"); // the call runs from here: its output is shown
      say(listener, "building the environment for pip=" + pip + " in " + folder
          + " (once; later calls reuse it)");
      try {
        deleteTree(folder); // a build that was interrupted
        // The new environment sees the base interpreter's packages (bulletin among them)
        // after its own: what pip installs here wins, nothing else is copied.
        run(account, listener, List.of(base.toString(), "-c", CREATE, folder.toString()));
        List<String> install = new ArrayList<>(List.of(python.toString(), "-m", "pip",
            "install", "--disable-pip-version-check", "--no-input", "--progress-bar", "off"));
        install.addAll(pip);
        run(account, listener, install);
        run(account, listener, List.of(python.toString(), "-c",
            "import pathlib, sys; pathlib.Path(sys.prefix, '" + READY + "').touch()"));
      } catch (ExecutorStartException e) {
        throw new ExecutorStartException("could not build the environment for pip=" + pip
            + ": " + e.getMessage(), e);
      }
      say(listener, "environment ready");
      return python;
    }
  }

  /**
   * Run by the base interpreter with the new environment's folder as argument: makes a venv
   * without pip (like {@code python -m venv --without-pip}) and a .pth in its site-packages
   * that adds the base's site-packages as site folders (so their own .pth files, editable
   * installs among them, work too), after its own. One process: no interpreter starts another.
   */
  private static final String CREATE = String.join("\n",
      "import os, site, sys, sysconfig, venv",
      "target = sys.argv[1]",
      "venv.EnvBuilder(with_pip=False, symlinks=True).create(target)",
      "purelib = sysconfig.get_path('purelib', vars={'base': target, 'platbase': target})",
      "with open(os.path.join(purelib, '_bulletin_base.pth'), 'w') as f:",
      "    f.write('import site; list(map(site.addsitedir, %r))\\n' % site.getsitepackages())");

  /** The account's own folder of environments: created 0700 and given to it. */
  private Path accountFolder(UnixAccount account) throws ExecutorStartException {
    int uid = account != null ? account.uid() : agentUid;
    Path folder = root.resolve("uid-" + uid);
    try {
      Files.createDirectories(root);
      if (!Files.isDirectory(folder)) {
        Files.createDirectory(folder, PosixFilePermissions.asFileAttribute(
            PosixFilePermissions.fromString("rwx------")));
      }
      if (account != null) {
        Files.setAttribute(folder, "unix:gid", account.gid());
        Files.setAttribute(folder, "unix:uid", account.uid());
      }
      int owner = (Integer) Files.getAttribute(folder, "unix:uid");
      if (owner != uid || !PosixFilePermissions.toString(Files.getPosixFilePermissions(folder))
          .endsWith("------")) {
        throw new ExecutorStartException("the environment cache " + folder + " must belong to"
            + " uid " + uid + " with mode 0700 (it belongs to uid " + owner + "); remove it", null);
      }
      return folder;
    } catch (IOException e) {
      throw new ExecutorStartException("cannot make the environment cache " + folder + ": "
          + e.getMessage() + " (set BULLETIN_ENV_CACHE for the worker)", e);
    }
  }

  /** The environment's fingerprint: what makes it, in one hash. */
  static String key(Path base, List<String> pip) {
    try {
      MessageDigest digest = MessageDigest.getInstance("SHA-256");
      digest.update(base.toAbsolutePath().toString().getBytes(StandardCharsets.UTF_8));
      for (String entry : pip) {
        digest.update((byte) 0);
        digest.update(entry.getBytes(StandardCharsets.UTF_8));
      }
      return HexFormat.of().formatHex(digest.digest()).substring(0, 24);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  /** Runs one build step as the account, its output to the call's; fails with its tail. */
  private static void run(UnixAccount account, CallListener listener, List<String> command)
      throws ExecutorStartException {
    ProcessBuilder builder = new ProcessBuilder(account == null ? command : account.wrap(command))
        .redirectErrorStream(true);
    builder.environment().clear();
    // Never the agent's own environment: it holds the cluster's secrets, and pip runs the
    // packages' code.
    builder.environment().putAll(ExecutorEnvironment.build(System.getenv(), Map.of(),
        account == null ? Map.of("PIP_NO_INPUT", "1") : Map.of("PIP_NO_INPUT", "1",
            "HOME", account.home().toString(), "USER", account.name())));
    if (account != null) {
      builder.directory(account.workingDirectory().toFile());
    }
    RecentOutput tail = new RecentOutput(4096);
    try {
      Process process = builder.start();
      process.getOutputStream().close();
      try (BufferedReader lines = new BufferedReader(new InputStreamReader(
          process.getInputStream(), StandardCharsets.UTF_8))) {
        for (String line = lines.readLine(); line != null; line = lines.readLine()) {
          byte[] data = ("[bulletin env] " + line + "\n").getBytes(StandardCharsets.UTF_8);
          tail.append(data);
          listener.output(true, data);
        }
      }
      if (!process.waitFor(BUILD_MINUTES, TimeUnit.MINUTES)) {
        process.destroyForcibly();
        throw new ExecutorStartException(command.get(0) + " ran past " + BUILD_MINUTES
            + " minutes", null);
      }
      if (process.exitValue() != 0) {
        throw new ExecutorStartException("'" + String.join(" ", command.subList(0,
            Math.min(command.size(), 4))) + " ...' " + ExitCauses.describe(process.exitValue())
            + ":\n" + tail.text(), null);
      }
    } catch (IOException e) {
      throw new ExecutorStartException("cannot run " + command.get(0) + ": " + e.getMessage(), e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new ExecutorStartException("interrupted while building an environment", e);
    }
  }

  private static void say(CallListener listener, String text) {
    listener.output(true, ("[bulletin] " + text + "\n").getBytes(StandardCharsets.UTF_8));
  }

  /** The account's folder holds it: deleted through descriptors, never following a link. */
  private static void deleteTree(Path folder) throws ExecutorStartException {
    dev.bulletin.bridge.UserFolder.deleteTree(folder);
    if (Files.exists(folder, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
      throw new ExecutorStartException("cannot remove the unfinished environment " + folder
          + "; remove it by hand", null);
    }
  }
}
