package dev.bulletin.worker.impl;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.worker.CallListener;
import dev.bulletin.worker.CallOutcome;
import dev.bulletin.worker.CallRequest;
import dev.bulletin.worker.PythonExecutor;
import io.vertx.core.json.JsonObject;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import py4j.Gateway;

/**
 * One warm Python executor: a {@code python -m bulletin._runtime._executor} process pinned to a set of
 * GPUs, the Py4J client that drives it, and the pumps that forward its output to the running
 * call. Runs one call at a time; {@link #call} blocks the calling thread. Started by
 * {@link ExecutorLauncher}; it belongs to one user from its first call on.
 */
final class ExecutorProcess {

  /** After a call returns, how long its output may take to drain from the pipes. */
  private static final long OUTPUT_DRAIN_MILLIS = 2_000;
  /** Ends calls whose result is not stored in time (one thread for every executor's watch). */
  private static final ScheduledExecutorService RESULT_WATCH =
      Executors.newSingleThreadScheduledExecutor(runnable -> {
        Thread thread = new Thread(runnable, "bulletin-result-watch");
        thread.setDaemon(true);
        return thread;
      });

  private final String id;
  private final List<Integer> gpuIds;
  private final Gateway gateway;
  private final Process process;
  private final PythonExecutor python;
  private final ObjectStore store;
  /** The account it runs as (users[].run_as), or null for the agent's own. */
  private final UnixAccount account;

  private volatile Running current;
  private volatile String stopReason;
  /** What to do once the preempted call's hooks returned: the call it is for, and the stop. */
  private volatile PendingPreemption preemption;
  /** The user whose calls this executor runs; null until it is first handed out (then fixed). */
  private volatile String owner;
  /** Its interpreter, memory limit and the environment fingerprint it serves. */
  private volatile ExecutorProfile profile;
  /** What holds its processes (a cgroup, else a sweep), its memory limit and its scratch. */
  private final ExecutorConfinement confinement;
  /** Why this executor must run no further call (set by what a call did to it); null if none. */
  private volatile String retireReason;
  private volatile long idleSinceNanos = System.nanoTime();
  /** The bytes its last call left kept in it (issue 29): only then is it asked to spill. */
  private volatile long keeps;
  private int calls;
  /** See {@link dev.bulletin.worker.WorkerOptions#resultTimeoutMillis}. */
  private final long resultTimeoutMillis;
  /** Why the call in progress was ended as hung after its function returned; null if it was not. */
  private volatile String hungReason;

  private record PendingPreemption(String taskId, Runnable stop) {}

  /**
   * The call in progress, the latch its two sentinel lines (stdout, stderr) count down, and the
   * watch on its result armed once its function returned.
   */
  private record Running(String taskId, CallListener listener, CountDownLatch drained,
      AtomicReference<ScheduledFuture<?>> resultWatch) {}

  ExecutorProcess(String id, List<Integer> gpuIds, Gateway gateway, Process process,
      PythonExecutor python, ObjectStore store, UnixAccount account, ExecutorProfile profile,
      ExecutorConfinement confinement, long resultTimeoutMillis) {
    this.resultTimeoutMillis = resultTimeoutMillis;
    this.account = account;
    this.confinement = confinement;
    this.profile = profile;
    this.id = id;
    this.gpuIds = gpuIds;
    this.gateway = gateway;
    this.process = process;
    this.python = python;
    this.store = store;
  }



  String id() {
    return id;
  }

  /** The executor's process id (its CPU time is the simulated GPUs' utilisation). */
  long pid() {
    return process.pid();
  }

  List<Integer> gpuIds() {
    return gpuIds;
  }

  boolean isAlive() {
    return process.isAlive();
  }

  /** The account it runs as, or null for the agent's own. */
  UnixAccount account() {
    return account;
  }

  ExecutorProfile profile() {
    return profile;
  }

  /** The user this executor belongs to, or null while it has run no call. */
  String owner() {
    return owner;
  }

  /**
   * Gives the executor to a user; it never runs another user's call (what a call leaves in a
   * process, in {@code __main__}, {@code builtins}, {@code sys.modules} or GPU memory, stays).
   */
  synchronized void assignTo(String user, ExecutorProfile served) {
    if (owner != null && !owner.equals(user)) {
      throw new IllegalStateException("executor " + id + " belongs to " + owner
          + " and cannot be given to " + user);
    }
    owner = user;
    profile = served; // a warm executor takes the fingerprint of its first call's environment
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
      java.util.Map<String, ObjectKey> spilled, java.util.Map<String, String> dropped,
      CallListener listener)
      throws UnfitExecutorException {
    claim(request.owner());
    Running running = new Running(request.taskId(), listener, new CountDownLatch(2),
        new AtomicReference<>());
    hungReason = null;
    current = running;
    listener.started(id);
    try {
      ExecutorReply reply = ExecutorReply.parse(python.run(
          ExecutorCall.toWire(request, lease, resultPath, spilled, dropped)));
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
      keeps = finished.keeps();
      return new CallOutcome.Returned(new ObjectKey(request.owner(), finished.result()),
          finished.size(), finished.raised(), finished.runSeconds(), keeps,
          finished.leasedCalls());
    } catch (ExecutorReply.MalformedReplyException e) {
      // User code runs in the executor and may have garbled it: it is not trusted again.
      retireReason = "it sent a malformed reply: " + e.getMessage();
      kill("replaced after a malformed reply");
      return new CallOutcome.ExecutorDied("executor " + id + " answered the call with a"
          + " malformed reply (" + e.getMessage() + ") and was replaced");
    } catch (RuntimeException e) {
      // Py4J fails the call when the process or its socket goes away.
      if (hungReason != null) {
        return new CallOutcome.ExecutorDied(hungReason);
      }
      if (stopReason != null) {
        return new CallOutcome.Stopped(stopReason);
      }
      return new CallOutcome.ExecutorDied(deathCause(e));
    } finally {
      current = null;
      ScheduledFuture<?> watch = running.resultWatch().getAndSet(null);
      if (watch != null) {
        watch.cancel(false);
      }
    }
  }

  /**
   * The call's function returned: encoding and storing its result now have
   * {@link #resultTimeoutMillis}, after which the executor is killed as hung (its own code, a
   * {@code __reduce__} or native code holding the interpreter, cannot be interrupted from inside).
   * Armed once per call; a call that writes the marker itself only shortens its own bound.
   */
  void returned(String taskId) {
    Running running = current;
    if (running == null || !running.taskId().equals(taskId)) {
      return;
    }
    ScheduledFuture<?> watch = RESULT_WATCH.schedule(() -> endHung(running),
        resultTimeoutMillis, TimeUnit.MILLISECONDS);
    if (!running.resultWatch().compareAndSet(null, watch)) {
      watch.cancel(false);
    }
  }

  private void endHung(Running running) {
    if (current != running) {
      return; // the call ended as the watch fired
    }
    hungReason = "its function returned, but encoding and storing its result did not end within "
        + resultTimeoutMillis / 1000.0 + " s (the worker's --result-timeout-seconds): executor "
        + id + " was stopped as hung. A __reduce__ or native code that blocks while the result"
        + " is pickled does this; return plain data (arrays, dicts, tensors on the CPU)";
    retireReason = "its call's result was not stored in time";
    kill(hungReason);
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
   * the executor's write lands in memory already allocated (see ObjectStore#stageRecycled), else
   * a pre-faulted file of the host's arena, unless the executor has a spare of its own. Either
   * way the store hands the file in already given to the namespace's account.
   */
  private boolean stageResultFile(CallRequest request, ExecutorReply.Stage stage,
      Path resultPath) {
    String name = resultPath.getFileName().toString();
    return store.stageRecycled(request.owner(), stage.size(), stage.mapped(),
        stage.spareReady(), name)
        || !stage.spareReady() && store.handOutSpare(request.owner(), stage.size(), name)
            .size() > 0;
  }

  /**
   * Sends SIGUSR1, which runs the call's checkpoint hooks in the executor; {@code safe} runs when
   * the executor says they returned (at once when it has none), on the output pump's thread.
   * Java has no API for signals other than TERM and KILL, hence {@code kill(1)}.
   *
   * @return false if the signal could not be sent (the caller then stops the call at once)
   */
  boolean signalPreemption(String taskId, Runnable safe) {
    preemption = new PendingPreemption(taskId, safe);
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

  /**
   * The executor's hooks for {@code taskId} returned. Honoured only for the call being preempted
   * and only once: the line is on the call's stderr, which its own code could also write, but
   * then it only stops itself sooner, and only after the agent chose to stop it.
   */
  void preemptSafe(String taskId) {
    PendingPreemption pending = preemption;
    Running running = current;
    if (pending != null && pending.taskId().equals(taskId) && running != null
        && running.taskId().equals(taskId)) {
      preemption = null;
      pending.stop().run();
    }
  }

  /**
   * Asks the idle executor to spill the values it keeps between calls to {@code path}
   * ({@link ResidentSpills}); its JSON reply.
   */
  String spill(Path path) {
    String reply = python.spill(path.toString());
    keeps = 0;
    return reply;
  }

  /**
   * Asks the executor to forget the values a client session kept in it (the session ended);
   * how many went.
   */
  int dropSession(String session) {
    JsonObject reply = new JsonObject(python.dropSession(session));
    keeps = reply.getLong("keeps", 0L);
    return reply.getInteger("dropped", 0);
  }

  /** The bytes its last call left kept in it (0: none). */
  long keeps() {
    return keeps;
  }

  /** Whether it was killed or asked to stop (its process may not have exited yet). */
  boolean stopped() {
    return stopReason != null;
  }

  /**
   * Kills the process and every process its calls started, without waiting for them; a call
   * in progress ends as {@link CallOutcome.Stopped}. {@link #shutdown} waits and cleans up.
   */
  void kill(String reason) {
    stopReason = reason;
    confinement.kill(); // the executor's process included
    gateway.shutdown();
  }

  /**
   * Ends the executor: kills it and every process its calls started (a call's background
   * process must not outlive the executor, nor keep its GPU), and returns once they are gone
   * and its cgroup and scratch space are removed. Its lifeline is closed too.
   */
  void shutdown() {
    if (stopReason == null) {
      stopReason = "worker shutting down";
    }
    confinement.end();
    closeQuietly(process);
    gateway.shutdown();
    String user = owner;
    if (user != null) {
      // Spares it made of released objects' files (bulletin/_runtime/_result_memory.py) are
      // named in the staging folder: an executor that was killed did not delete them.
      store.deleteStaged(user, sparePrefix(id));
    }
  }

  /**
   * The names of the spares an executor keeps in its user's staging folder start with this: its
   * id, where every character but an ASCII letter, digit, '-', '_' or '.' is '_' (as the
   * executor's {@code _file_name_part} writes it).
   */
  static String sparePrefix(String executorId) {
    StringBuilder name = new StringBuilder(".exec-");
    for (char c : executorId.toCharArray()) {
      boolean plain = c < 128 && (Character.isLetterOrDigit(c) || c == '-' || c == '_' || c == '.');
      name.append(plain ? c : '_');
    }
    return name.append("-spare-").toString();
  }

  private String deathCause(RuntimeException callError) {
    try {
      if (process.waitFor(5, TimeUnit.SECONDS)) {
        if (confinement.oomKilled()) {
          return "the call " + confinement.overLimit() + " (executor " + id + ")";
        }
        long limit = profile.memoryBytes();
        // Under RLIMIT_DATA native code may abort where Python would raise MemoryError.
        return "executor " + id + " " + ExitCauses.describe(process.exitValue())
            + (confinement.selfLimited() ? " (it ran under the call's memory limit of"
                + " memory=" + dev.bulletin.protocol.Quantities.formatSize(limit) + ", which"
                + " native code that cannot allocate may end this way)" : "");
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    process.destroyForcibly();
    return "executor " + id + " lost its Py4J connection (" + callError.getMessage()
        + ") and was stopped";
  }

  void route(boolean stderr, byte[] data) {
    Running running = current;
    if (running != null) {
      running.listener().output(stderr, data);
    } else {
      System.err.print("[" + id + "] " + new String(data, StandardCharsets.UTF_8));
    }
  }

  void sentinel(String taskId) {
    Running running = current;
    if (running != null && running.taskId().equals(taskId)) {
      running.drained().countDown();
    }
  }

  void streamClosed() {
    Running running = current;
    if (running != null) {
      running.drained().countDown();
    }
  }



  /** Closes the executor's stdin, its lifeline: it exits when it reads end of file. */
  private static void closeQuietly(Process process) {
    try {
      process.getOutputStream().close();
    } catch (IOException ignored) {
      // Already closed.
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
