package dev.bulletin.worker.impl;

import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.worker.WorkerOptions;
import dev.bulletin.worker.WorkerStatusView;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * The executors of one agent. Executors are keyed by the GPUs they are pinned to
 * (CUDA_VISIBLE_DEVICES is fixed at process start): one warm executor per GPU and a few CPU
 * executors are started up front; an executor goes back to the idle set when its call ends,
 * and one that must not run another call (dead, stopped, damaged by its call, at its call
 * limit) is retired and, when it held a warm slot, replaced in the background.
 *
 * <p>An executor belongs to one user: warm executors start unowned and belong to the user of
 * their first call; one that has run a user's call never runs another user's. A call of a user
 * with no idle executor of their own on its GPUs retires the idle executors of other users
 * there (their processes, every process their calls started and the GPU memory they hold go,
 * before the new executor starts: {@link ExecutorEnds}) and takes a fresh one; so a user
 * switch on a GPU costs one executor start. A user's idle executors are retired after
 * {@link WorkerOptions#executorIdleMillis}, so users who come and go do not keep processes (and
 * CUDA contexts) forever.
 *
 * <p>An executor also has a profile ({@link ExecutorProfile}): the interpreter it runs (the
 * worker's, the caller's own, or a pip= environment's; {@link CallEnvironments}), its memory
 * limit and the caller's environment fingerprint. A call runs only on an executor of its
 * profile; when a user's fingerprint changes (a package was installed), their idle executors
 * of the old one are retired at their next call.
 */
final class ExecutorPool {

  private static final Logger LOG = Logger.getLogger(ExecutorPool.class.getName());
  static final List<Integer> CPU_ONLY = List.of();
  private static final CompletableFuture<Void> DONE = ExecutorEnds.DONE;

  private final WorkerOptions options;
  private final ObjectStore store;
  private final ExecutorService threads;
  private final ScheduledExecutorService sweeper = Executors.newSingleThreadScheduledExecutor(
      runnable -> {
        Thread thread = new Thread(runnable, "bulletin-executor-sweeper");
        thread.setDaemon(true);
        return thread;
      });
  /** Idle executors by GPU set; guarded by {@code this}. */
  private final Map<List<Integer>, Deque<ExecutorProcess>> idle = new HashMap<>();
  /** Executors being started in the background, by GPU set. */
  private final Map<List<Integer>, CompletableFuture<Void>> warming = new ConcurrentHashMap<>();
  private final ExecutorEnds ends;
  private final ResidentSpills spills;
  private final AtomicInteger sequence = new AtomicInteger();
  /**
   * Executors started or starting: counted before their process starts, so that a status taken
   * while a replacement starts does not read as a pool that later grew.
   */
  private final AtomicInteger live = new AtomicInteger();
  private final AtomicInteger liveCpu = new AtomicInteger();
  /**
   * {@link #live}'s executors by their exact GPU set; guarded by {@code this}. A warm
   * replacement is not started where a call already launched one (two CUDA contexts).
   */
  private final Map<List<Integer>, Integer> onGpus = new HashMap<>();
  private final AtomicLong launches = new AtomicLong();
  private volatile boolean closed;
  private final RunAsAccounts accounts = new RunAsAccounts();
  private final CallEnvironments environments;
  /** What warm executors start with: the worker's interpreter, no memory limit. */
  private final ExecutorProfile warmProfile;

  ExecutorPool(WorkerOptions options, ObjectStore store, ExecutorService threads) {
    this.options = options;
    this.store = store;
    this.threads = threads;
    this.spills = new ResidentSpills(store, options.resident());
    this.ends = new ExecutorEnds(threads, spills);
    this.environments = new CallEnvironments(options);
    this.warmProfile = new ExecutorProfile(options.python(), 0, "");
    long period = Math.max(50, Math.min(Math.min(options.executorIdleMillis(),
        options.resident().idleMillis()) / 2, 30_000));
    sweeper.scheduleWithFixedDelay(this::retireIdle, period, period, TimeUnit.MILLISECONDS);
  }

  /** Starts the warm executors; completes when they are ready. */
  CompletableFuture<Void> start() {
    List<CompletableFuture<Void>> started = new ArrayList<>();
    for (int gpu = 0; gpu < options.gpus().count(); gpu++) {
      started.add(warmUp(List.of(gpu)));
    }
    for (int i = 0; i < Math.min(options.warmCpuExecutors(), options.cpus()); i++) {
      started.add(warmUp(CPU_ONLY));
    }
    return CompletableFuture.allOf(started.toArray(CompletableFuture[]::new));
  }

  /**
   * An executor for a call of this user on these GPUs with this spec (memory limit, Python
   * environment): an idle one of theirs of that profile, else an unowned warm one that can
   * serve it, else a new one (after retiring other users' idle executors on these GPUs, and
   * the user's own that serve an environment the user no longer has). The executor returned
   * belongs to the user. Building an environment for the spec is said to the listener.
   */
  ExecutorProcess take(String owner, java.util.Optional<String> runAs, List<Integer> gpuIds,
      dev.bulletin.worker.ExecutorSpec spec, dev.bulletin.worker.CallListener listener)
      throws ExecutorStartException {
    UnixAccount account = accounts.of(runAs, owner);
    ExecutorProfile wanted = environments.resolve(spec, account, listener);
    if (gpuIds.isEmpty()) {
      keepCpuSpare();
    }
    while (true) {
      List<ExecutorProcess> others = new ArrayList<>();
      List<ExecutorProcess> dead = new ArrayList<>();
      ExecutorProcess found;
      synchronized (this) {
        found = idleFor(owner, account, gpuIds, wanted, dead);
        if (found != null) {
          found.assignTo(owner, wanted);
        } else {
          others.addAll(othersInTheWay(owner, gpuIds));
          others.addAll(ownInTheWay(owner, gpuIds, wanted));
          others.forEach(this::removeIdle);
        }
      }
      // Ended here, before this call runs: no process of theirs (a call's background process,
      // a daemon) is left beside it, on its GPUs least of all.
      dead.forEach(executor -> retireNow(executor, "it exited while idle"));
      if (found != null) {
        ends.await(gpuIds);
        return found;
      }
      others.forEach(other -> retireNow(other, other.owner().equals(owner)
          ? "its user's environment changed (or a call needs another memory limit on its GPUs)"
          : "a call of another user needs its "
          + (gpuIds.isEmpty() ? "CPU slot" : "GPUs " + gpuIds)));
      // A replacement already starting for these GPUs is the one to use: launching another
      // would leave two executors (two CUDA contexts) pinned to the same GPUs.
      CompletableFuture<Void> starting = warming.get(gpuIds);
      if (starting == null || gpuIds.isEmpty() || account != null
          || !warmProfile.serves(wanted, true)) {
        ends.await(gpuIds);
        return launchFor(owner, account, gpuIds, wanted);
      }
      starting.exceptionally(error -> null).join();
    }
  }

  /**
   * The user's idle executor on exactly these GPUs, else an unowned one that runs as the
   * account the user's must (unowned ones run as the agent's); guarded by this.
   */
  private ExecutorProcess idleFor(String owner, UnixAccount account, List<Integer> gpuIds,
      ExecutorProfile wanted, List<ExecutorProcess> dead) {
    Deque<ExecutorProcess> candidates = idle.get(gpuIds);
    if (candidates == null) {
      return null;
    }
    ExecutorProcess unowned = null;
    for (ExecutorProcess candidate : new ArrayList<>(candidates)) {
      if (!candidate.isAlive()) {
        candidates.remove(candidate);
        dead.add(candidate); // what it started may still run: ended by the caller
      } else if (owner.equals(candidate.owner()) && candidate.profile().serves(wanted, false)) {
        candidates.remove(candidate);
        return candidate;
      } else if (candidate.owner() == null && unowned == null
          && java.util.Objects.equals(candidate.account(), account)
          && candidate.profile().serves(wanted, true)) {
        unowned = candidate;
      }
    }
    if (unowned != null) {
      candidates.remove(unowned);
    }
    return unowned;
  }

  /**
   * Other users' idle executors that a new executor for this call would sit beside: those on
   * any of its GPUs (their GPU memory); for a CPU call, when the CPU slots are all taken by
   * live executors, the one idle longest. Guarded by this.
   */
  private List<ExecutorProcess> othersInTheWay(String owner, List<Integer> gpuIds) {
    List<ExecutorProcess> others = new ArrayList<>();
    ExecutorProcess longestIdleCpu = null;
    for (Deque<ExecutorProcess> executors : idle.values()) {
      for (ExecutorProcess executor : executors) {
        if (executor.owner() == null || executor.owner().equals(owner)) {
          continue;
        }
        if (!gpuIds.isEmpty() && executor.gpuIds().stream().anyMatch(gpuIds::contains)) {
          others.add(executor);
        } else if (gpuIds.isEmpty() && executor.gpuIds().isEmpty() && (longestIdleCpu == null
            || executor.idleSinceNanos() < longestIdleCpu.idleSinceNanos())) {
          longestIdleCpu = executor;
        }
      }
    }
    if (longestIdleCpu != null && liveCpu.get() >= options.cpus()) {
      others.add(longestIdleCpu);
    }
    return others;
  }

  /**
   * The user's own idle executors that must go for this call: those that serve an environment
   * the user no longer has (another interpreter or fingerprint: a package was installed), and,
   * on this call's GPUs, those of another profile (two would hold two CUDA contexts). Guarded
   * by this.
   */
  private List<ExecutorProcess> ownInTheWay(String owner, List<Integer> gpuIds,
      ExecutorProfile wanted) {
    List<ExecutorProcess> stale = new ArrayList<>();
    for (Deque<ExecutorProcess> executors : idle.values()) {
      for (ExecutorProcess executor : executors) {
        if (!owner.equals(executor.owner())) {
          continue;
        }
        ExecutorProfile profile = executor.profile();
        boolean otherEnvironment = !profile.fingerprint().equals(wanted.fingerprint())
            && !wanted.fingerprint().isEmpty() && profile.python().equals(wanted.python());
        boolean onTheseGpus = !gpuIds.isEmpty()
            && executor.gpuIds().stream().anyMatch(gpuIds::contains);
        if (otherEnvironment || onTheseGpus && !profile.serves(wanted, false)) {
          stale.add(executor);
        }
      }
    }
    return stale;
  }

  private void removeIdle(ExecutorProcess executor) {
    Deque<ExecutorProcess> executors = idle.get(executor.gpuIds());
    if (executors != null) {
      executors.remove(executor);
    }
  }

  /** Retires the executors of users that have been idle longer than the configured time. */
  private void retireIdle() {
    long now = System.nanoTime();
    long limit = TimeUnit.MILLISECONDS.toNanos(options.executorIdleMillis());
    List<ExecutorProcess> expired = new ArrayList<>();
    synchronized (this) {
      for (Deque<ExecutorProcess> executors : idle.values()) {
        for (ExecutorProcess executor : executors) {
          if (executor.owner() != null && now - executor.idleSinceNanos() > limit) {
            expired.add(executor);
          }
        }
      }
      expired.forEach(this::removeIdle);
    }
    expired.forEach(executor -> retire(executor, "idle for "
        + options.executorIdleMillis() / 1000.0 + " s (--executor-idle-seconds)"));
    spills.dropIdle();
  }

  /**
   * Retires an executor that could not load a call, and starts a fresh one (it has run nothing)
   * for that call in its place: not an idle one, which an earlier call may have damaged too.
   */
  ExecutorProcess replaceUnfit(ExecutorProcess unfit, String reason)
      throws ExecutorStartException {
    ends.now(unfit, reason);
    forget(unfit, false, DONE);
    return launchFor(unfit.owner(), unfit.account(), unfit.gpuIds(), unfit.profile());
  }

  /**
   * Takes back an executor whose call ended: idle for the next call, or retired when it must
   * not run another one.
   */
  void giveBack(ExecutorProcess executor) {
    String retire = !executor.isAlive() || executor.stopped() ? "it exited or was stopped"
        : executor.retireReason() != null ? executor.retireReason()
        : options.executorMaxCalls() > 0 && executor.calls() >= options.executorMaxCalls()
            ? "it ran its " + options.executorMaxCalls() + " calls (--executor-max-calls)"
        : null;
    if (retire != null || closed) {
      retire(executor, closed ? "the worker is closing" : retire);
      return;
    }
    executor.markIdle();
    synchronized (this) {
      idle.computeIfAbsent(executor.gpuIds(), key -> new ArrayDeque<>()).push(executor);
    }
  }

  /**
   * Ends an executor (its processes, its calls' processes, its cgroup and scratch) in the
   * background, forgets it, and replaces it if it was a warm one once it has ended: a
   * replacement on its GPUs never starts beside what is left of it.
   */
  void retire(ExecutorProcess executor, String reason) {
    forget(executor, true, ends.inBackground(executor, reason));
  }

  /** Ends an executor on this thread, then forgets it (and replaces a warm one). */
  private void retireNow(ExecutorProcess executor, String reason) {
    ends.now(executor, reason);
    forget(executor, true, DONE);
  }

  /** The spilled resident values of this agent's executors. */
  ResidentSpills spills() {
    return spills;
  }

  /** Takes an executor out of the idle set; false when a call took it first. */
  synchronized boolean takeIdle(ExecutorProcess executor) {
    Deque<ExecutorProcess> executors = idle.get(executor.gpuIds());
    return executors != null && executors.remove(executor);
  }

  /** The idle executors, a copy (a session's end and the host's resident cap reach them). */
  synchronized List<ExecutorProcess> idleExecutors() {
    List<ExecutorProcess> all = new ArrayList<>();
    idle.values().forEach(all::addAll);
    return all;
  }

  /**
   * Spills what the user's other idle executors keep (on other GPUs of this host): the call
   * about to run on {@code taken} restores it there, since a value is on one executor only.
   */
  void spillOthersOf(ExecutorProcess taken) {
    List<ExecutorProcess> own = new ArrayList<>();
    synchronized (this) {
      idle.values().forEach(executors -> executors.stream()
          .filter(e -> e != taken && taken.owner().equals(e.owner()) && e.keeps() > 0)
          .forEach(own::add));
      own.forEach(this::removeIdle);
    }
    // Out of the idle set while they spill, so no call takes one meanwhile.
    own.forEach(executor -> {
      spills.spillFrom(executor);
      giveBack(executor);
    });
  }

  WorkerStatusView status() {
    int idleCount;
    synchronized (this) {
      idleCount = idle.values().stream().mapToInt(Deque::size).sum();
    }
    return new WorkerStatusView(live.get(), idleCount, launches.get());
  }

  /** Stops the idle executors; those still running calls are the caller's to stop. */
  void close() {
    closed = true;
    sweeper.shutdownNow();
    List<ExecutorProcess> all = new ArrayList<>();
    synchronized (this) {
      idle.values().forEach(all::addAll);
      idle.clear();
    }
    all.forEach(ExecutorProcess::shutdown);
  }

  /**
   * Keeps one unowned CPU executor idle, so that concurrent CPU calls (of any user) do not wait
   * for a Python start.
   */
  private void keepCpuSpare() {
    boolean spareNeeded;
    synchronized (this) {
      Deque<ExecutorProcess> cpu = idle.get(CPU_ONLY);
      spareNeeded = (cpu == null || cpu.stream().noneMatch(e -> e.owner() == null))
          && liveCpu.get() < options.cpus() && options.warmCpuExecutors() > 0
          && !warming.containsKey(CPU_ONLY);
    }
    if (spareNeeded) {
      warmUp(CPU_ONLY);
    }
  }

  /** A new executor for a user, running as their account if they have one. */
  private ExecutorProcess launchFor(String owner, UnixAccount account, List<Integer> gpuIds,
      ExecutorProfile profile) throws ExecutorStartException {
    if (account != null) {
      try {
        store.giveFolderTo(owner, account.uid(), account.gid());
      } catch (dev.bulletin.bridge.ObjectStoreException e) {
        throw new ExecutorStartException("cannot give " + owner + "'s store folder to account "
            + account.name() + ": " + e.getMessage(), e);
      }
    }
    ExecutorProcess executor = launch(gpuIds, account, profile);
    executor.assignTo(owner, profile);
    return executor;
  }

  private ExecutorProcess launch(List<Integer> gpuIds, UnixAccount account,
      ExecutorProfile profile) throws ExecutorStartException {
    counted(gpuIds, 1);
    return launchCounted(gpuIds, account, profile);
  }

  /** Launches an executor already counted in {@link #onGpus}; counts it out if it fails. */
  private ExecutorProcess launchCounted(List<Integer> gpuIds, UnixAccount account,
      ExecutorProfile profile) throws ExecutorStartException {
    String id = options.workerId() + "-e" + sequence.incrementAndGet();
    ExecutorProcess executor;
    try {
      executor = ExecutorLauncher.launch(id, gpuIds, account, profile, options, store);
    } catch (ExecutorStartException | RuntimeException e) {
      counted(gpuIds, -1);
      throw e;
    }
    launches.incrementAndGet();
    return executor;
  }

  private CompletableFuture<Void> warmUp(List<Integer> gpuIds) {
    return warmUp(gpuIds, DONE);
  }

  /** Starts a warm executor on these GPUs once {@code after} (the end of the last) is done. */
  private CompletableFuture<Void> warmUp(List<Integer> gpuIds, CompletableFuture<Void> after) {
    CompletableFuture<Void> starting = after.exceptionally(error -> null).thenRunAsync(() -> {
      synchronized (this) {
        if (!gpuIds.isEmpty() && onGpus.getOrDefault(gpuIds, 0) > 0) {
          return; // a call's own executor holds these GPUs; its end starts the warm one
        }
        counted(gpuIds, 1);
      }
      try {
        giveBack(launchCounted(gpuIds, null, warmProfile));
      } catch (ExecutorStartException e) {
        LOG.log(Level.WARNING, e.getMessage());
        throw new IllegalStateException(e.getMessage(), e);
      }
    }, threads);
    warming.put(gpuIds, starting);
    starting.whenComplete((ignored, error) -> warming.remove(gpuIds, starting));
    return starting;
  }

  /**
   * Counts an executor out and, if asked, starts a replacement when it held a warm slot, once
   * {@code ended} (the end of its processes) is done.
   */
  private void forget(ExecutorProcess executor, boolean replace, CompletableFuture<Void> ended) {
    counted(executor.gpuIds(), -1);
    if (closed || !replace) {
      return;
    }
    if (executor.gpuIds().size() == 1) {
      warmUp(executor.gpuIds(), ended);
    } else if (executor.gpuIds().isEmpty()) {
      keepCpuSpare();
    }
  }

  private synchronized void counted(List<Integer> gpuIds, int change) {
    live.addAndGet(change);
    if (gpuIds.isEmpty()) {
      liveCpu.addAndGet(change);
    }
    onGpus.merge(gpuIds, change, (was, delta) -> was + delta == 0 ? null : was + delta);
  }
}
