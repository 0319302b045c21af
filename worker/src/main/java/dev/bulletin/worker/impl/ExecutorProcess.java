package dev.bulletin.worker.impl;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.worker.CallListener;
import dev.bulletin.worker.CallOutcome;
import dev.bulletin.worker.CallRequest;
import dev.bulletin.worker.PythonExecutor;
import dev.bulletin.worker.WorkerOptions;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.stream.Collectors;
import py4j.CallbackClient;
import py4j.Gateway;

/**
 * One warm Python executor: a {@code python -m bulletin._executor} process pinned to a set of
 * GPUs, the Py4J client that drives it, and the pumps that forward its output to the running
 * call. Runs one call at a time; {@link #call} blocks the calling thread.
 *
 * <p>The JVM listens on no Py4J port: the executor serves a Py4J callback server (loopback,
 * authenticated by a token it reads from its stdin) and announces its port on stdout before any
 * user code runs; the agent calls it and it only answers. So user code in the executor holds no
 * credential that reaches the JVM (Py4J has no per-method allowlist: a gateway token would reach
 * every class). Its environment is built from an allowlist ({@link ExecutorEnvironment}).
 */
final class ExecutorProcess {

  private static final SecureRandom RANDOM = new SecureRandom();
  /**
   * Py4J logs every command (paths included) at INFO; its GatewayServer, which the agent no
   * longer starts, used to turn that off. Held here so the setting is not collected.
   */
  private static final java.util.logging.Logger PY4J_LOG = quietPy4j();
  private static final InetAddress LOOPBACK = InetAddress.getLoopbackAddress();
  /** After a call returns, how long its output may take to drain from the pipes. */
  private static final long OUTPUT_DRAIN_MILLIS = 2_000;

  private final String id;
  private final List<Integer> gpuIds;
  private final Gateway gateway;
  private final Process process;
  private final PythonExecutor python;
  private final ObjectStore store;

  private volatile Running current;
  private volatile String stopReason;
  /** The user whose calls this executor runs; null until it is first handed out (then fixed). */
  private volatile String owner;
  /** Why this executor must run no further call (set by what a call did to it); null if none. */
  private volatile String retireReason;
  private volatile long idleSinceNanos = System.nanoTime();
  private int calls;

  /** The call in progress, and the latch its two sentinel lines (stdout, stderr) count down. */
  private record Running(String taskId, CallListener listener, CountDownLatch drained) {}

  private ExecutorProcess(String id, List<Integer> gpuIds, Gateway gateway, Process process,
      PythonExecutor python, ObjectStore store) {
    this.id = id;
    this.gpuIds = gpuIds;
    this.gateway = gateway;
    this.process = process;
    this.python = python;
    this.store = store;
  }

  /** Starts an executor and waits until it has announced its callback server and answered. */
  static ExecutorProcess launch(String id, List<Integer> gpuIds, WorkerOptions options,
      ObjectStore store) throws ExecutorStartException {
    String token = HexFormat.of().formatHex(randomBytes());
    Holder holder = new Holder();
    Process process;
    try {
      ProcessBuilder builder = new ProcessBuilder(options.python().toString(), "-m", "bulletin._executor");
      Map<String, String> env = builder.environment();
      Map<String, String> own = Map.of(
          "BULLETIN_EXECUTOR_ID", id,
          "BULLETIN_STORE_DIR", store.root().toString(),
          "BULLETIN_STORE_CAPACITY", Long.toString(store.capacityBytes()),
          "CUDA_VISIBLE_DEVICES", gpuIds.stream().map(String::valueOf).collect(Collectors.joining(",")),
          "BULLETIN_SIMULATED_GPUS", options.gpus().simulated() && !gpuIds.isEmpty() ? "1" : "0",
          "PYTHONUNBUFFERED", "1");
      Map<String, String> built = ExecutorEnvironment.build(System.getenv(),
          options.extraEnvironment(), own);
      env.clear();
      env.putAll(built);
      process = builder.start();
      // The token goes over the pipe, never the environment or argv (which other processes of
      // the same account, and user code, can read); the executor reads it once.
      OutputStream stdin = process.getOutputStream();
      stdin.write((token + "\n").getBytes(StandardCharsets.US_ASCII));
      stdin.flush();
    } catch (IOException e) {
      throw new ExecutorStartException("cannot start executor " + id + " with " + options.python()
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
          python, store);
      holder.executor = executor;
      return executor;
    } catch (TimeoutException | ExecutionException | RuntimeException e) {
      String state = !process.isAlive() ? ExitCauses.describe(exitStatus(process))
          : e instanceof TimeoutException ? "did not announce itself within "
              + options.executorStartTimeoutMillis() + " ms"
          : "announced itself but could not be called (" + e.getMessage() + ")";
      String output = holder.early.text();
      process.destroyForcibly();
      if (gateway != null) {
        gateway.shutdown();
      }
      throw new ExecutorStartException("executor " + id + " failed to start: " + state
          + (output.isBlank() ? "" : "; its output:\n" + output), e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      process.destroyForcibly();
      throw new ExecutorStartException("interrupted while starting executor " + id, e);
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

  String id() {
    return id;
  }

  List<Integer> gpuIds() {
    return gpuIds;
  }

  boolean isAlive() {
    return process.isAlive();
  }

  /** The user this executor belongs to, or null while it has run no call. */
  String owner() {
    return owner;
  }

  /**
   * Gives the executor to a user; it never runs another user's call (what a call leaves in a
   * process, in {@code __main__}, {@code builtins}, {@code sys.modules} or GPU memory, stays).
   */
  synchronized void assignTo(String user) {
    if (owner != null && !owner.equals(user)) {
      throw new IllegalStateException("executor " + id + " belongs to " + owner
          + " and cannot be given to " + user);
    }
    owner = user;
  }

  void markIdle() {
    idleSinceNanos = System.nanoTime();
  }

  /** Calls this executor has been given. */
  synchronized int calls() {
    return calls;
  }

  /** Why it must not run another call, or null. */
  String retireReason() {
    return retireReason;
  }

  long idleSinceNanos() {
    return idleSinceNanos;
  }

  /**
   * Runs one call on this executor, blocking until it ends. The reply names the result's id;
   * its bytes are in {@code resultPath}, not yet published.
   *
   * @throws UnfitExecutorException if the executor could not load the call and an earlier call
   *     may have damaged it: the call did not run; retire this executor
   */
  CallOutcome call(CallRequest request, ObjectStore.Lease lease, Path resultPath,
      CallListener listener) throws UnfitExecutorException {
    claim(request.owner());
    Running running = new Running(request.taskId(), listener, new CountDownLatch(2));
    current = running;
    listener.started(id);
    try {
      ExecutorReply reply = ExecutorReply.parse(python.run(
          ExecutorCall.toWire(request, lease, resultPath)));
      if (reply instanceof ExecutorReply.Stage stage) {
        reply = ExecutorReply.parse(python.commit(stageResultFile(request, stage, resultPath)));
      }
      awaitQuietly(running.drained(), OUTPUT_DRAIN_MILLIS);
      if (reply instanceof ExecutorReply.Unfit unfit) {
        retireReason = "it could not load a call: " + unfit.reason();
        throw new UnfitExecutorException(unfit.reason());
      }
      if (!(reply instanceof ExecutorReply.Finished finished)) {
        throw new ExecutorReply.MalformedReplyException(
            "the executor answered commit with another stage");
      }
      finished.retire().ifPresent(reason -> retireReason = reason);
      return new CallOutcome.Returned(new ObjectKey(request.owner(), finished.result()),
          finished.size(), finished.raised(), finished.runSeconds());
    } catch (ExecutorReply.MalformedReplyException e) {
      // User code runs in the executor and may have garbled it: it is not trusted again.
      kill("replaced after a malformed reply");
      return new CallOutcome.ExecutorDied("executor " + id + " answered the call with a"
          + " malformed reply (" + e.getMessage() + ") and was replaced");
    } catch (RuntimeException e) {
      // Py4J fails the call when the process or its socket goes away.
      if (stopReason != null) {
        return new CallOutcome.Stopped(stopReason);
      }
      return new CallOutcome.ExecutorDied(deathCause(e));
    } finally {
      current = null;
    }
  }

  private synchronized void claim(String user) {
    if (!user.equals(owner)) {
      throw new IllegalStateException("executor " + id + " belongs to " + owner
          + " and was given a call of " + user + " (a bug of the agent's pool)");
    }
    calls++;
  }

  /**
   * Stages, at the call's result path, the file of a released object of the call owner's, so
   * the executor's write lands in memory already allocated (see ObjectStore#stageRecycled).
   */
  private boolean stageResultFile(CallRequest request, ExecutorReply.Stage stage,
      Path resultPath) {
    return store.stageRecycled(request.owner(), stage.size(), stage.mapped(),
        resultPath.getFileName().toString());
  }

  /**
   * Sends SIGUSR1, which runs the call's checkpoint hooks in the executor. Java has no API for
   * signals other than TERM and KILL, hence {@code kill(1)}.
   *
   * @return false if the signal could not be sent (the caller then stops the call at once)
   */
  boolean signalPreemption() {
    try {
      Process signal = new ProcessBuilder("kill", "-USR1", Long.toString(process.pid()))
          .redirectErrorStream(true).start();
      return signal.waitFor(5, java.util.concurrent.TimeUnit.SECONDS) && signal.exitValue() == 0;
    } catch (java.io.IOException e) {
      return false;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    }
  }

  /** Kills the process; a call in progress ends as {@link CallOutcome.Stopped}. */
  void kill(String reason) {
    stopReason = reason;
    process.destroyForcibly();
    gateway.shutdown();
  }

  /** Asks the executor to exit (closing its stdin: it exits at end of file), then makes sure. */
  void shutdown() {
    stopReason = "worker shutting down";
    closeQuietly(process);
    try {
      if (!process.waitFor(2, TimeUnit.SECONDS)) {
        process.destroyForcibly();
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      process.destroyForcibly();
    }
    gateway.shutdown();
  }

  private String deathCause(RuntimeException callError) {
    try {
      if (process.waitFor(5, TimeUnit.SECONDS)) {
        return "executor " + id + " " + ExitCauses.describe(process.exitValue());
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    process.destroyForcibly();
    return "executor " + id + " lost its Py4J connection (" + callError.getMessage()
        + ") and was stopped";
  }

  private void route(boolean stderr, byte[] data) {
    Running running = current;
    if (running != null) {
      running.listener().output(stderr, data);
    } else {
      System.err.print("[" + id + "] " + new String(data, StandardCharsets.UTF_8));
    }
  }

  private void sentinel(String taskId) {
    Running running = current;
    if (running != null && running.taskId().equals(taskId)) {
      running.drained().countDown();
    }
  }

  private void streamClosed() {
    Running running = current;
    if (running != null) {
      running.drained().countDown();
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
    OutputPump pump = new OutputPump(in,
        data -> {
          ExecutorProcess executor = holder.executor;
          if (executor == null) {
            holder.early.append(data);
          } else {
            executor.route(stderr, data);
          }
        },
        taskId -> {
          ExecutorProcess executor = holder.executor;
          if (executor != null) {
            executor.sentinel(taskId);
          }
        },
        announcement -> {
          if (!stderr && !holder.announced.isDone()) {
            try {
              holder.announced.complete(Announcement.parse(announcement));
            } catch (IllegalArgumentException e) {
              holder.announced.completeExceptionally(e);
            }
          }
        },
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

  /** Closes the executor's stdin, its lifeline: it exits when it reads end of file. */
  private static void closeQuietly(Process process) {
    try {
      process.getOutputStream().close();
    } catch (IOException ignored) {
      // Already closed.
    }
  }

  private static int exitStatus(Process process) {
    try {
      return process.waitFor();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return -1;
    }
  }

  private static void awaitQuietly(CountDownLatch latch, long millis) {
    try {
      latch.await(millis, TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
