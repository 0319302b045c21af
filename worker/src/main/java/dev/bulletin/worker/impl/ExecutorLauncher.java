package dev.bulletin.worker.impl;

import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.worker.PythonExecutor;
import dev.bulletin.worker.WorkerOptions;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Consumer;
import java.util.stream.Collectors;
import py4j.CallbackClient;
import py4j.Gateway;

/**
 * Starts a {@code python -m bulletin._runtime._executor} process and connects to it. The JVM listens on
 * no Py4J port: the executor serves a Py4J callback server (loopback, authenticated by a token
 * it reads from its stdin) and announces its port on stdout before any user code runs; the agent
 * calls it and it only answers. So user code in the executor holds no credential that reaches
 * the JVM (Py4J has no per-method allowlist: a gateway token would reach every class). Its
 * environment is built from an allowlist ({@link ExecutorEnvironment}).
 */
final class ExecutorLauncher {
  private ExecutorLauncher() {}

  private static final SecureRandom RANDOM = new SecureRandom();
  /**
   * Py4J logs every command (paths included) at INFO unless a GatewayServer turns that off, and
   * the agent starts none. Held here so the setting is not collected with the logger.
   */
  private static final java.util.logging.Logger PY4J_LOG = quietPy4j();
  private static final InetAddress LOOPBACK = InetAddress.getLoopbackAddress();

  /**
   * Starts an executor and waits until it has announced its callback server and answered.
   *
   * @param account the account to run it as (the agent runs as root), or null for the agent's
   */
  static ExecutorProcess launch(String id, List<Integer> gpuIds, UnixAccount account,
      ExecutorProfile profile, WorkerOptions options, ObjectStore store)
      throws ExecutorStartException {
    String token = HexFormat.of().formatHex(randomBytes());
    Holder holder = new Holder();
    Process process;
    Map<String, String> extra = options.extraEnvironment();
    ExecutorConfinement confinement = ExecutorConfinement.prepare(id, account, profile,
        neededFolders(profile, account, store, extra));
    try {
      ProcessBuilder builder = new ProcessBuilder(confinement.command(List.of(
          profile.python().toString(), "-m", "bulletin._runtime._executor")));
      Map<String, String> own = new java.util.HashMap<>(Map.of(
          "BULLETIN_EXECUTOR_ID", id,
          "BULLETIN_STORE_DIR", store.root().toString(),
          "BULLETIN_STORE_CAPACITY", Long.toString(store.capacityBytes()),
          "CUDA_VISIBLE_DEVICES", gpuIds.stream().map(String::valueOf).collect(Collectors.joining(",")),
          "BULLETIN_SIMULATED_GPUS", options.gpus().simulated() && !gpuIds.isEmpty() ? "1" : "0",
          "PYTHONUNBUFFERED", "1"));
      own.put("BULLETIN_RESIDENT_MAX_BYTES", Long.toString(options.resident().userResidentBytes()));
      own.putAll(GpuShareEnvironment.of(profile.gpuFraction(), gpuIds,
          options.gpus().simulated(), System.getenv()));
      own.putAll(confinement.environment());
      if (account != null) {
        own.putAll(Map.of("HOME", account.home().toString(), "USER", account.name(),
            "LOGNAME", account.name()));
        builder.directory(account.workingDirectory().toFile());
      }
      Map<String, String> env = builder.environment();
      env.clear();
      env.putAll(ExecutorEnvironment.build(System.getenv(), extra, own));
      process = builder.start();
      confine(process, confinement, id);
      // The token goes over the pipe, never the environment or argv (which other processes of
      // the same account, and user code, can read); the executor reads it once.
      OutputStream stdin = process.getOutputStream();
      stdin.write((token + "\n").getBytes(StandardCharsets.US_ASCII));
      stdin.flush();
    } catch (IOException e) {
      confinement.end();
      throw new ExecutorStartException("cannot start executor " + id + " with " + profile.python()
          + ": " + e.getMessage() + " (is --python an interpreter with the bulletin package?)", e);
    }
    startPump(id + "-out", process.getInputStream(), false, holder);
    startPump(id + "-err", process.getErrorStream(), true, holder);
    Gateway gateway = null;
    try {
      Announcement announced = holder.announced
          .get(options.executorStartTimeoutMillis(), TimeUnit.MILLISECONDS);
      gateway = new Gateway(null, new CallbackClient(announced.port(), LOOPBACK, token));
      PythonExecutor python = (PythonExecutor) gateway.createProxy(
          PythonExecutor.class.getClassLoader(), new Class<?>[] {PythonExecutor.class},
          announced.objectId());
      if (!"pong".equals(python.ping())) {
        throw new IllegalStateException("the executor did not answer its first ping");
      }
      ExecutorProcess executor = new ExecutorProcess(id, List.copyOf(gpuIds), gateway, process,
          python, store, account, profile, confinement, options.resultTimeoutMillis());
      holder.executor = executor;
      return executor;
    } catch (TimeoutException | ExecutionException | RuntimeException e) {
      String state = !process.isAlive() ? ExitCauses.describe(exitStatus(process))
          : e instanceof TimeoutException ? "did not announce itself within "
              + options.executorStartTimeoutMillis() + " ms"
          : "announced itself but could not be called (" + e.getMessage() + ")";
      String output = holder.early.text();
      confinement.end();
      if (gateway != null) {
        gateway.shutdown();
      }
      throw new ExecutorStartException("executor " + id + " failed to start: " + state
          + (output.isBlank() ? "" : "; its output:\n" + output), e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      confinement.end();
      throw new ExecutorStartException("interrupted while starting executor " + id, e);
    }
  }

  /**
   * Puts the new process in its cgroup before it has read its token (so before any call);
   * its processes and scratch go when it exits.
   */
  private static void confine(Process process, ExecutorConfinement confinement, String id)
      throws IOException {
    try {
      confinement.hold(process);
    } catch (IOException e) {
      process.destroyForcibly();
      throw new IOException("cannot move executor " + id + " into its cgroup: "
          + e.getMessage(), e);
    }
  }

  /**
   * The folders an executor reads or writes by path: those under /tmp stay visible in a
   * private /tmp (ExecutorScratch).
   */
  private static List<Path> neededFolders(ExecutorProfile profile, UnixAccount account,
      ObjectStore store, Map<String, String> extra) {
    List<Path> needed = new ArrayList<>(List.of(store.root()));
    for (Path python : List.of(profile.python(), realPath(profile.python()))) {
      if (!python.isAbsolute()) {
        continue; // a name looked up on PATH
      }
      Path bin = python.getParent();
      // Its prefix: a venv's or an installation's folder (bin/python), else its own folder.
      needed.add(bin.getFileName() != null && bin.getFileName().toString().equals("bin")
          && bin.getParent() != null ? bin.getParent() : bin);
    }
    if (account != null) {
      needed.add(account.workingDirectory());
    }
    // pip= environments (PipEnvironments), which calls load by path; each account's is 0700.
    String environments = System.getenv("BULLETIN_ENV_CACHE");
    if (environments != null && !environments.isBlank()) {
      needed.add(Path.of(environments));
    }
    for (String name : List.of("PYTHONPATH", "VIRTUAL_ENV", "CONDA_PREFIX")) {
      String value = extra.getOrDefault(name, System.getenv(name));
      if (value != null) {
        for (String entry : value.split(java.io.File.pathSeparator)) {
          if (!entry.isBlank()) {
            needed.add(Path.of(entry));
          }
        }
      }
    }
    return needed;
  }

  private static Path realPath(Path path) {
    try {
      return path.toRealPath();
    } catch (IOException e) {
      return path;
    }
  }

  /** The executor's callback server, as it announced it. */
  private record Announcement(int port, String objectId) {
    static Announcement parse(String text) {
      String[] parts = text.strip().split(" ");
      if (parts.length != 2 || !parts[1].matches("[A-Za-z0-9_]{1,32}")) {
        throw new IllegalArgumentException("the executor announced itself in an unknown form: '"
            + text + "' (expected '<port> <object id>')");
      }
      try {
        int port = Integer.parseInt(parts[0]);
        if (port < 1 || port > 65535) {
          throw new NumberFormatException("out of range");
        }
        return new Announcement(port, parts[1]);
      } catch (NumberFormatException e) {
        throw new IllegalArgumentException("the executor announced an invalid port: '" + text
            + "'");
      }
    }
  }

  /**
   * Output can arrive before the executor object exists (startup errors); the holder routes it
   * to a buffer until then, so a failed start can quote it.
   */
  private static final class Holder {
    volatile ExecutorProcess executor;
    final RecentOutput early = new RecentOutput(4096);
    /** Completed by the first announcement on stdout; later ones (user output) are ignored. */
    final CompletableFuture<Announcement> announced = new CompletableFuture<>();
  }

  private static void startPump(String name, java.io.InputStream in, boolean stderr, Holder holder) {
    Map<String, Consumer<String>> markers = new HashMap<>();
    markers.put(OutputPump.SENTINEL_WORD, toExecutor(holder, ExecutorProcess::sentinel));
    if (stderr) {
      markers.put(OutputPump.RETURNED_WORD, toExecutor(holder, ExecutorProcess::returned));
      markers.put(OutputPump.PREEMPT_SAFE_WORD, toExecutor(holder, ExecutorProcess::preemptSafe));
    } else {
      markers.put(OutputPump.READY_WORD, announcement -> {
        if (!holder.announced.isDone()) {
          try {
            holder.announced.complete(Announcement.parse(announcement));
          } catch (IllegalArgumentException e) {
            holder.announced.completeExceptionally(e);
          }
        }
      });
    }
    OutputPump pump = new OutputPump(in,
        data -> {
          ExecutorProcess executor = holder.executor;
          if (executor == null) {
            holder.early.append(data);
          } else {
            executor.route(stderr, data);
          }
        },
        markers,
        () -> {
          ExecutorProcess executor = holder.executor;
          if (executor != null) {
            executor.streamClosed();
          }
        });
    Thread thread = new Thread(pump, name);
    thread.setDaemon(true);
    thread.start();
  }

  /** A marker's task id for the executor, once there is one (markers before it are dropped). */
  private static Consumer<String> toExecutor(Holder holder,
      java.util.function.BiConsumer<ExecutorProcess, String> handler) {
    return taskId -> {
      ExecutorProcess executor = holder.executor;
      if (executor != null) {
        handler.accept(executor, taskId);
      }
    };
  }

  private static java.util.logging.Logger quietPy4j() {
    java.util.logging.Logger logger = java.util.logging.Logger.getLogger("py4j");
    logger.setLevel(java.util.logging.Level.OFF);
    return logger;
  }

  private static byte[] randomBytes() {
    byte[] bytes = new byte[24];
    RANDOM.nextBytes(bytes);
    return bytes;
  }

  private static int exitStatus(Process process) {
    try {
      return process.waitFor();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return -1;
    }
  }
}
