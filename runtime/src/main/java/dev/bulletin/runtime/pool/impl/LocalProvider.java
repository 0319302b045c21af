package dev.bulletin.runtime.pool.impl;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.bulletin.runtime.pool.PoolConfig;
import dev.bulletin.runtime.pool.ProvidedWorker;
import dev.bulletin.runtime.pool.ProviderContext;
import dev.bulletin.runtime.pool.ProviderException;
import dev.bulletin.runtime.pool.ProviderKind;
import dev.bulletin.runtime.pool.WorkerHandle;
import dev.bulletin.runtime.pool.WorkerProvider;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * Workers as processes on this host. Each runs in its own session and process group
 * ({@code setsid}), so stopping it reaches its executors too: SIGTERM to the group, SIGKILL after
 * the pool's grace. Output goes to one log file per worker. A small JSON file per worker (pid,
 * process start time, expiry) lets a restarted runtime find them again; the start time guards
 * against a reused pid. A pool with a walltime gets it enforced here as Slurm would: the worker
 * learns it through {@code --expires-at} and is killed when it passes.
 */
public final class LocalProvider implements WorkerProvider {

  private static final ObjectMapper JSON = new ObjectMapper();

  private final ProviderContext context;
  private final Path folder;
  private final ScheduledExecutorService threads = Executors.newScheduledThreadPool(1, r -> {
    Thread thread = new Thread(r, "bulletin-local-provider");
    thread.setDaemon(true);
    return thread;
  });
  /** Stops block for the grace; they get their own threads so launches never wait behind them. */
  private final ExecutorService stoppers = Executors.newCachedThreadPool(r -> {
    Thread thread = new Thread(r, "bulletin-local-stop");
    thread.setDaemon(true);
    return thread;
  });

  /** What the state file holds; the field names are the file's. */
  record Entry(String cluster, String pool, String worker, long pid, long started,
      long expiresAt, long graceMillis, String log) {}

  public LocalProvider(ProviderContext context) {
    this.context = context;
    this.folder = context.stateDir().resolve("local");
    // A restarted runtime keeps enforcing the walltime of the workers it adopts.
    for (Entry entry : entries()) {
      scheduleExpiry(entry);
    }
  }

  @Override
  public ProviderKind kind() {
    return ProviderKind.LOCAL;
  }

  public Path logOf(String workerId) {
    return folder.resolve("logs").resolve(workerId + ".log");
  }

  /** A local worker joins within seconds; its token is good for little more. */
  private static final Duration JOIN_WITHIN = Duration.ofMinutes(5);

  @Override
  public CompletableFuture<WorkerHandle> launch(PoolConfig pool, String workerId) {
    return CompletableFuture.supplyAsync(() -> start(pool, workerId), threads);
  }

  private WorkerHandle start(PoolConfig pool, String workerId) {
    Optional<Duration> walltime = pool.worker().walltimeLimit();
    Instant expiresAt = walltime.map(w -> Instant.now().plus(w)).orElse(Instant.EPOCH);
    List<String> argv = new ArrayList<>();
    argv.add("setsid");
    argv.addAll(context.command().argv(pool, context.pythonFor(pool), context.headAddress(),
        workerId, pool.local().simulateGpus()));
    if (walltime.isPresent()) {
      argv.addAll(List.of("--expires-at", Long.toString(expiresAt.getEpochSecond())));
    }
    Path log = logOf(workerId);
    Process process;
    try {
      Files.createDirectories(log.getParent());
      ProcessBuilder builder = new ProcessBuilder(argv)
          .redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")))
          .redirectErrorStream(true)
          .redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile()));
      Commands.SECRET_VARIABLES.forEach(builder.environment()::remove);
      builder.environment().put("BULLETIN_WORKER_TOKEN", context.workerToken());
      context.joinTokens().export(workerId, JOIN_WITHIN, builder.environment());
      process = builder.start();
    } catch (IOException e) {
      throw new ProviderException("cannot start a local worker for pool " + pool.name() + " ("
          + String.join(" ", argv) + "): " + e.getMessage(), e);
    }
    long started = process.toHandle().info().startInstant().map(Instant::toEpochMilli).orElse(0L);
    Entry entry = new Entry(context.clusterId(), pool.name(), workerId, process.pid(), started,
        walltime.isPresent() ? expiresAt.toEpochMilli() : 0, pool.local().terminateGrace().toMillis(),
        log.toString());
    write(entry);
    scheduleExpiry(entry);
    return handle(entry);
  }

  private WorkerHandle handle(Entry entry) {
    return new WorkerHandle(ProviderKind.LOCAL, entry.pool(), entry.worker(), Long.toString(entry.pid()));
  }

  private void scheduleExpiry(Entry entry) {
    if (entry.expiresAt() > 0) {
      long delay = Math.max(0, entry.expiresAt() - System.currentTimeMillis());
      threads.schedule(() -> stoppers.execute(() -> stop(entry)), delay, TimeUnit.MILLISECONDS);
    }
  }

  @Override
  public CompletableFuture<Void> terminate(WorkerHandle handle) {
    return CompletableFuture.runAsync(() -> {
      Path file = folder.resolve(handle.workerId() + ".json");
      if (Files.exists(file)) {
        stop(read(file).orElseThrow(() -> new ProviderException("unreadable state file " + file)));
      }
    }, stoppers);
  }

  /** SIGTERM to the group, SIGKILL after the grace, then forget the worker. Blocks for the grace. */
  private void stop(Entry entry) {
    Optional<ProcessHandle> process = live(entry);
    if (process.isPresent()) {
      signalGroup(entry.pid(), "TERM");
      try {
        process.get().onExit().get(entry.graceMillis(), TimeUnit.MILLISECONDS);
      } catch (Exception timeoutOrInterrupt) {
        // Still there after the grace.
      }
      // The group may outlive its leader (executors): kill whatever is left of it.
      signalGroup(entry.pid(), "KILL");
      try {
        process.get().onExit().get(10, TimeUnit.SECONDS);
      } catch (Exception e) {
        throw new ProviderException("worker " + entry.worker() + " (pid " + entry.pid()
            + ") is still alive 10s after SIGKILL");
      }
    }
    try {
      Files.deleteIfExists(folder.resolve(entry.worker() + ".json"));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static void signalGroup(long pgid, String signal) {
    Commands.run(List.of("kill", "-s", signal, "--", "-" + pgid), Map.of(), Duration.ofSeconds(10));
  }

  @Override
  public CompletableFuture<List<ProvidedWorker>> list() {
    return CompletableFuture.supplyAsync(() -> {
      List<ProvidedWorker> out = new ArrayList<>();
      for (Entry entry : entries()) {
        if (live(entry).isPresent()) {
          out.add(new ProvidedWorker(handle(entry), true, entry.expiresAt() > 0
              ? Optional.of(Instant.ofEpochMilli(entry.expiresAt())) : Optional.empty()));
        } else {
          try {
            Files.deleteIfExists(folder.resolve(entry.worker() + ".json"));
          } catch (IOException ignored) {
            // Tried again at the next list.
          }
        }
      }
      return out;
    }, threads);
  }

  /** The process, if it still runs and is the one we started (same start time). */
  private static Optional<ProcessHandle> live(Entry entry) {
    return ProcessHandle.of(entry.pid()).filter(ProcessHandle::isAlive).filter(p -> entry.started() == 0
        || p.info().startInstant().map(Instant::toEpochMilli).orElse(entry.started()) == entry.started());
  }

  private List<Entry> entries() {
    if (!Files.isDirectory(folder)) {
      return List.of();
    }
    try (Stream<Path> files = Files.list(folder)) {
      return files.filter(f -> f.getFileName().toString().endsWith(".json"))
          .map(LocalProvider::read).flatMap(Optional::stream)
          .filter(e -> e.cluster().equals(context.clusterId())).toList();
    } catch (IOException e) {
      throw new UncheckedIOException("cannot list " + folder + ": " + e.getMessage(), e);
    }
  }

  private static Optional<Entry> read(Path file) {
    try {
      return Optional.of(JSON.readValue(file.toFile(), Entry.class));
    } catch (IOException e) {
      return Optional.empty();
    }
  }

  private void write(Entry entry) {
    try {
      Path temp = folder.resolve(entry.worker() + ".json.tmp");
      JSON.writeValue(temp.toFile(), entry);
      Files.move(temp, folder.resolve(entry.worker() + ".json"), StandardCopyOption.ATOMIC_MOVE,
          StandardCopyOption.REPLACE_EXISTING);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot write the state of worker " + entry.worker(), e);
    }
  }

  @Override
  public void close() {
    threads.shutdownNow();
    stoppers.shutdown();
  }
}
