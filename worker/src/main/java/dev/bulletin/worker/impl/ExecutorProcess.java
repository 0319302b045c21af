package dev.bulletin.worker.impl;

import dev.bulletin.bridge.ObjectId;
import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.worker.CallListener;
import dev.bulletin.worker.CallOutcome;
import dev.bulletin.worker.CallRequest;
import dev.bulletin.worker.PythonExecutor;
import dev.bulletin.worker.WorkerOptions;
import java.io.IOException;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.stream.Collectors;
import py4j.GatewayServer;

/**
 * One warm Python executor: a {@code python -m bulletin._runtime._executor} process pinned to a
 * set of GPUs, its Py4J gateway, and the pumps that forward its output to the running call. Runs
 * one call at a time; {@link #call} blocks the calling thread.
 */
final class ExecutorProcess {

  private static final SecureRandom RANDOM = new SecureRandom();
  private static final InetAddress LOOPBACK = InetAddress.getLoopbackAddress();
  /** After a call returns, how long its output may take to drain from the pipes. */
  private static final long OUTPUT_DRAIN_MILLIS = 2_000;

  private final String id;
  private final List<Integer> gpuIds;
  private final GatewayServer gateway;
  private final Process process;
  private final PythonExecutor python;

  private volatile Running current;
  private volatile String stopReason;

  /** The call in progress, and the latch its two sentinel lines (stdout, stderr) count down. */
  private record Running(String taskId, CallListener listener, CountDownLatch drained) {}

  private ExecutorProcess(String id, List<Integer> gpuIds, GatewayServer gateway, Process process,
      PythonExecutor python) {
    this.id = id;
    this.gpuIds = gpuIds;
    this.gateway = gateway;
    this.process = process;
    this.python = python;
  }

  /** Starts an executor and waits until it has registered over Py4J. */
  static ExecutorProcess launch(String id, List<Integer> gpuIds, WorkerOptions options,
      ObjectStore store) throws ExecutorStartException {
    String token = HexFormat.of().formatHex(randomBytes());
    ExecutorRegistrar registrar = new ExecutorRegistrar(store);
    GatewayServer gateway = new GatewayServer.GatewayServerBuilder()
        .entryPoint(registrar)
        .javaPort(0)
        .javaAddress(LOOPBACK)
        .callbackClient(0, LOOPBACK, token)
        .authToken(token)
        .build();
    gateway.start(true);
    Holder holder = new Holder();
    Process process;
    try {
      ProcessBuilder builder = new ProcessBuilder(options.python().toString(), "-m",
          "bulletin._runtime._executor");
      Map<String, String> env = builder.environment();
      env.putAll(options.extraEnvironment());
      env.put("BULLETIN_GATEWAY_PORT", Integer.toString(gateway.getListeningPort()));
      env.put("BULLETIN_GATEWAY_TOKEN", token);
      env.put("BULLETIN_EXECUTOR_ID", id);
      env.put("BULLETIN_STORE_DIR", store.root().toString());
      env.put("BULLETIN_STORE_CAPACITY", Long.toString(store.capacityBytes()));
      env.put("CUDA_VISIBLE_DEVICES", gpuIds.stream().map(String::valueOf).collect(Collectors.joining(",")));
      env.put("BULLETIN_SIMULATED_GPUS", options.gpus().simulated() && !gpuIds.isEmpty() ? "1" : "0");
      env.put("PYTHONUNBUFFERED", "1");
      process = builder.start();
    } catch (IOException e) {
      gateway.shutdown();
      throw new ExecutorStartException("cannot start executor " + id + " with " + options.python()
          + ": " + e.getMessage() + " (is --python an interpreter with the bulletin package?)", e);
    }
    closeQuietly(process);
    startPump(id + "-out", process.getInputStream(), false, holder);
    startPump(id + "-err", process.getErrorStream(), true, holder);
    try {
      ExecutorRegistrar.Registration registration = registrar.registered()
          .get(options.executorStartTimeoutMillis(), TimeUnit.MILLISECONDS);
      gateway.resetCallbackClient(LOOPBACK, registration.callbackPort());
      ExecutorProcess executor = new ExecutorProcess(id, List.copyOf(gpuIds), gateway, process,
          registration.executor());
      holder.executor = executor;
      return executor;
    } catch (TimeoutException | ExecutionException e) {
      String output = holder.early.text();
      process.destroyForcibly();
      gateway.shutdown();
      String state = process.isAlive() ? "did not register within "
          + options.executorStartTimeoutMillis() + " ms" : ExitCauses.describe(exitStatus(process));
      throw new ExecutorStartException("executor " + id + " failed to start: " + state
          + (output.isBlank() ? "" : "; its output:\n" + output), e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      process.destroyForcibly();
      gateway.shutdown();
      throw new ExecutorStartException("interrupted while starting executor " + id, e);
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

  /**
   * Runs one call on this executor, blocking until it ends. The reply names the result's id;
   * its bytes are in {@code resultPath}, not yet published.
   */
  CallOutcome call(CallRequest request, ObjectStore.Lease lease, Path resultPath,
      CallListener listener) {
    Running running = new Running(request.taskId(), listener, new CountDownLatch(2));
    current = running;
    listener.started(id);
    StringBuilder refs = new StringBuilder();
    for (ObjectKey ref : request.refs()) {
      refs.append(ref.id().hex()).append(' ').append(lease.path(ref)).append('\n');
    }
    try {
      String reply = python.run(request.taskId(), lease.path(request.function()).toString(),
          lease.path(request.args()).toString(), refs.toString(), resultPath.toString());
      awaitQuietly(running.drained(), OUTPUT_DRAIN_MILLIS);
      return parseReply(reply, request.args().namespace());
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

  /** Kills the process; a call in progress ends as {@link CallOutcome.Stopped}. */
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

  void kill(String reason) {
    stopReason = reason;
    process.destroyForcibly();
    gateway.shutdown();
  }

  /** Asks the executor to exit, then makes sure it does. */
  void shutdown() {
    stopReason = "worker shutting down";
    process.destroy();
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

  private static CallOutcome parseReply(String reply, String namespace) {
    String[] parts = reply == null ? new String[0] : reply.strip().split(" ");
    if (parts.length != 4 || !(parts[0].equals("ok") || parts[0].equals("raised"))) {
      throw new IllegalStateException("executor replied in an unknown form: " + reply);
    }
    return new CallOutcome.Returned(new ObjectKey(namespace, ObjectId.parse(parts[1])),
        Long.parseLong(parts[2]),
        parts[0].equals("raised"), Double.parseDouble(parts[3]));
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

  private static byte[] randomBytes() {
    byte[] bytes = new byte[24];
    RANDOM.nextBytes(bytes);
    return bytes;
  }

  private static void closeQuietly(Process process) {
    try {
      process.getOutputStream().close(); // executors read nothing from stdin
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
