package dev.bulletin.runtime.pool.impl;

import dev.bulletin.runtime.pool.Autoscaler;
import dev.bulletin.runtime.pool.BackoffEvent;
import dev.bulletin.runtime.pool.PendingDemand;
import dev.bulletin.runtime.pool.PoolConfig;
import dev.bulletin.runtime.pool.PoolEvent;
import dev.bulletin.runtime.pool.PoolListener;
import dev.bulletin.runtime.pool.PoolSnapshot;
import dev.bulletin.runtime.pool.PoolStatus;
import dev.bulletin.runtime.pool.PoolWorker;
import dev.bulletin.runtime.pool.PoolsConfig;
import dev.bulletin.runtime.pool.ProvidedWorker;
import dev.bulletin.runtime.pool.ProviderKind;
import dev.bulletin.runtime.pool.RegisteredWorker;
import dev.bulletin.runtime.pool.ScalingDecision;
import dev.bulletin.runtime.pool.ScalingMetrics;
import dev.bulletin.runtime.pool.ScalingPolicy;
import dev.bulletin.runtime.pool.WorkerHandle;
import dev.bulletin.runtime.pool.WorkerProvider;
import dev.bulletin.runtime.pool.WorkerState;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.Executor;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * The autoscaler: one {@link ScalingPolicy} per pool, one table of the workers it launched, and
 * the providers. State is touched only on the owner executor; provider answers hop back onto it.
 * Every so often it lists the providers' workers to learn which jobs run, which ended before
 * registering (a failed launch), and which it does not know (stopped: nothing leaks).
 */
public final class PoolAutoscaler implements Autoscaler {

  private static final Logger LOG = Logger.getLogger("dev.bulletin.runtime.pool");

  private final PoolsConfig config;
  private final Map<ProviderKind, WorkerProvider> providers;
  private final Clock clock;
  private final Executor owner;
  private final PoolListener listener;
  private final Map<String, ScalingPolicy> policies = new LinkedHashMap<>();
  private final Map<String, TrackedWorker> workers = new LinkedHashMap<>();
  /** Worker ids whose launch the provider has not answered yet, with their pool. */
  private final Map<String, String> launching = new HashMap<>();
  private final Map<ProviderKind, Instant> nextList = new HashMap<>();
  private final Map<ProviderKind, Boolean> listing = new HashMap<>();
  /** Each pool's last launch failure, for its status while it backs off. */
  private final Map<String, String> lastFailure = new HashMap<>();
  private long sequence;
  private boolean stopped;
  /** How long a worker an earlier runtime launched has to reattach (zero: start_timeout only). */
  private Duration reattachGrace = Duration.ZERO;

  public PoolAutoscaler(PoolsConfig config, Map<ProviderKind, WorkerProvider> providers, Clock clock,
      ScalingMetrics metrics, Executor owner, PoolListener listener) {
    this.config = config;
    this.providers = Map.copyOf(providers);
    this.clock = clock;
    this.owner = owner;
    this.listener = listener;
    for (PoolConfig pool : config.pools()) {
      if (!providers.containsKey(pool.provider())) {
        throw new IllegalArgumentException("pool " + pool.name() + " needs a "
            + pool.provider().configName() + " provider");
      }
      policies.put(pool.name(), new ScalingPolicy(pool, clock, metrics));
    }
  }

  /** How often the providers are listed: cheap locally, gentle on slurmctld. */
  static Duration listInterval(ProviderKind kind) {
    // Kubernetes' list reads the provider's watch cache: as cheap as the local one.
    return kind == ProviderKind.SLURM ? Duration.ofSeconds(10) : Duration.ofSeconds(2);
  }

  @Override
  public CompletableFuture<Void> start(List<WorkerHandle> journaled, Duration reattachGrace) {
    this.reattachGrace = reattachGrace;
    trackJournaled(journaled);
    List<CompletableFuture<Void>> adopted = new ArrayList<>();
    for (Map.Entry<ProviderKind, WorkerProvider> e : providers.entrySet()) {
      long asked = sequence;
      adopted.add(e.getValue().list().thenAcceptAsync(listed -> reconcile(e.getKey(), listed, asked, true), owner));
    }
    return CompletableFuture.allOf(adopted.toArray(CompletableFuture[]::new));
  }

  /**
   * The journal's workers are tracked before the first tick and listing: a tick meanwhile sees
   * them (min_workers is met) instead of launching their like again. Their sequence is the
   * current one, so the first listing decides whether they still exist.
   */
  private void trackJournaled(List<WorkerHandle> journaled) {
    Instant now = clock.instant();
    for (WorkerHandle handle : journaled) {
      if (!policies.containsKey(handle.pool()) || !providers.containsKey(handle.provider())) {
        // Its pool is gone from the configuration: the listing stops it as an orphan.
        listener.ended(handle);
        continue;
      }
      TrackedWorker w = new TrackedWorker(handle.workerId(), handle.pool(), handle, now, sequence);
      w.runningSince = now;
      w.adopted = true;
      w.adoptedUntil = reattachDeadline(now);
      workers.put(w.id, w);
      event(w.pool, "adopted", w.id, handle + ", launched by an earlier runtime (journaled);"
          + " waiting for it to reattach");
    }
  }

  private Instant reattachDeadline(Instant now) {
    return reattachGrace.isZero() ? null : now.plus(reattachGrace);
  }

  @Override
  public Optional<String> poolOf(String workerId) {
    TrackedWorker w = workers.get(workerId);
    return w != null ? Optional.of(w.pool) : Optional.ofNullable(launching.get(workerId));
  }

  @Override
  public void tick(List<RegisteredWorker> registered, List<PendingDemand> unservable) {
    if (stopped) {
      return;
    }
    Instant now = clock.instant();
    Map<String, RegisteredWorker> byId = new HashMap<>();
    registered.forEach(r -> byId.put(r.workerId(), r));
    for (TrackedWorker w : List.copyOf(workers.values())) {
      RegisteredWorker r = byId.get(w.id);
      if (w.terminating) {
        continue;
      }
      if (r != null) {
        if (!w.registered) {
          w.registered = true;
          policies.get(w.pool).launchSucceeded();
          event(w.pool, "registered", w.id, (w.adopted ? "reattached" : "registered")
              + " after " + Duration.between(w.launchedAt, now).toMillis() + " ms (" + w.handle
              + ")");
          w.adoptedUntil = null;
        }
        w.runningCalls = r.runningCalls();
        w.idleSince = r.idleSince();
        r.expiresAt().ifPresent(at -> w.expiresAt = Optional.of(at));
      } else if (w.registered) {
        stop(w, "lost", "its connection to the runtime is gone; stopping its allocation");
      } else if (w.adoptedUntil != null && !now.isBefore(w.adoptedUntil)) {
        stop(w, "terminate", "launched by an earlier runtime, it did not reattach within the"
            + " worker grace (" + reattachGrace.toSeconds() + " s); stopping its allocation");
      }
    }
    for (Map.Entry<ProviderKind, WorkerProvider> e : providers.entrySet()) {
      if (!listing.getOrDefault(e.getKey(), false)
          && !now.isBefore(nextList.getOrDefault(e.getKey(), Instant.MIN))) {
        listing.put(e.getKey(), true);
        nextList.put(e.getKey(), now.plus(listInterval(e.getKey())));
        long asked = sequence;
        e.getValue().list().whenCompleteAsync((listed, error) -> {
          listing.put(e.getKey(), false);
          if (error != null) {
            event("", "list-failed", null, e.getKey().configName() + " provider: " + cause(error));
          } else {
            reconcile(e.getKey(), listed, asked, false);
          }
        }, owner);
      }
    }
    Map<String, List<PendingDemand>> routed = route(unservable);
    for (ScalingPolicy policy : policies.values()) {
      String pool = policy.pool().name();
      List<PoolWorker> snapshot = new ArrayList<>();
      for (TrackedWorker w : workers.values()) {
        if (w.pool.equals(pool) && !w.terminating) {
          snapshot.add(w.view(now));
        }
      }
      int inFlight = (int) launching.values().stream().filter(pool::equals).count();
      for (ScalingDecision d : policy.decide(new PoolSnapshot(snapshot, routed.getOrDefault(pool, List.of()), inFlight))) {
        apply(policy.pool(), d);
      }
    }
  }

  /** Each size of call goes to the first pool, in config order, whose worker shape fits it. */
  private Map<String, List<PendingDemand>> route(List<PendingDemand> unservable) {
    Map<String, List<PendingDemand>> routed = new HashMap<>();
    for (PendingDemand demand : unservable) {
      config.pools().stream().filter(p -> p.worker().fits(demand)).findFirst()
          .ifPresent(p -> routed.computeIfAbsent(p.name(), k -> new ArrayList<>()).add(demand));
    }
    return routed;
  }

  private void apply(PoolConfig pool, ScalingDecision decision) {
    if (decision instanceof ScalingDecision.Launch launch) {
      event(pool.name(), "launch", null, launch.reason());
      for (int i = 0; i < launch.count(); i++) {
        launch(pool);
      }
    } else if (decision instanceof ScalingDecision.Replace replace) {
      TrackedWorker w = workers.get(replace.workerId());
      w.draining = true;
      event(pool.name(), "replace", w.id, replace.reason());
      listener.drain(w.id, replace.reason());
    } else if (decision instanceof ScalingDecision.Terminate terminate) {
      stop(workers.get(terminate.workerId()), "terminate", terminate.reason());
    }
  }

  private void launch(PoolConfig pool) {
    String workerId = pool.name() + "-" + UUID.randomUUID().toString().substring(0, 8);
    launching.put(workerId, pool.name());
    providers.get(pool.provider()).launch(pool, workerId).whenCompleteAsync((handle, error) -> {
      launching.remove(workerId);
      if (error != null) {
        BackoffEvent backoff = policies.get(pool.name()).launchFailed(cause(error));
        lastFailure.put(pool.name(), backoff.message());
        event(pool.name(), "launch-failed", workerId, backoff.reason());
        return;
      }
      TrackedWorker w = new TrackedWorker(workerId, pool.name(), handle, clock.instant(), ++sequence);
      // A local process runs once launched; a Slurm job runs when squeue says so.
      w.runningSince = pool.provider() == ProviderKind.LOCAL ? w.launchedAt : null;
      workers.put(workerId, w);
      listener.launched(handle);
      event(pool.name(), "launched", workerId, handle.toString());
      if (stopped) {
        stop(w, "terminate", "the autoscaler stopped while this worker was launching");
      }
    }, owner);
  }

  private void stop(TrackedWorker w, String kind, String reason) {
    w.terminating = true;
    event(w.pool, kind, w.id, reason);
    if (w.registered) {
      listener.stopping(w.id, reason);
    }
    terminate(w.handle).whenCompleteAsync((ok, error) -> {
      // Gone either way from our table; if scancel failed, the next list finds the job unknown
      // and stops it again.
      workers.remove(w.id);
      if (error != null) {
        event(w.pool, "terminate-failed", w.id, cause(error));
      } else {
        listener.ended(w.handle);
      }
    }, owner);
  }

  private CompletableFuture<Void> terminate(WorkerHandle handle) {
    return providers.get(handle.provider()).terminate(handle);
  }

  /** Applies a provider listing asked for when {@code sequence} was {@code asked}. */
  private void reconcile(ProviderKind kind, List<ProvidedWorker> listed, long asked, boolean adopting) {
    Instant now = clock.instant();
    Map<String, ProvidedWorker> byId = new HashMap<>();
    listed.forEach(p -> byId.put(p.handle().workerId(), p));
    for (TrackedWorker w : List.copyOf(workers.values())) {
      if (w.handle.provider() != kind || w.terminating || w.sequence > asked) {
        continue; // launched after the listing was asked for: not in it yet
      }
      ProvidedWorker p = byId.get(w.id);
      if (p == null) {
        workers.remove(w.id);
        listener.ended(w.handle);
        if (w.adopted && !w.registered) {
          event(w.pool, "gone", w.id, w.handle + ", launched by an earlier runtime, is gone at"
              + " its " + kind.configName() + " provider: forgotten");
        } else if (w.registered) {
          String why = providers.get(kind).whyGone(w.handle).map(r -> ": " + r).orElse("");
          event(w.pool, "exited", w.id, "its " + kind.configName() + " allocation ended ("
              + w.handle + ")" + why);
          listener.stopping(w.id, "its allocation ended" + why);
        } else {
          BackoffEvent backoff = policies.get(w.pool).launchFailed("worker " + w.handle
              + " ended before it registered" + providers.get(kind).whyGone(w.handle)
                  .map(r -> ": " + r).orElse("") + logHint(w));
          lastFailure.put(w.pool, backoff.message());
          event(w.pool, "launch-failed", w.id, backoff.reason());
        }
        continue;
      }
      if (p.running() && w.runningSince == null) {
        w.runningSince = now;
      }
      if (w.expiresAt.isEmpty()) {
        w.expiresAt = p.expiresAt();
      }
    }
    for (ProvidedWorker p : listed) {
      String id = p.handle().workerId();
      if (workers.containsKey(id) || launching.containsKey(id)) {
        continue;
      }
      if (adopting && policies.containsKey(p.handle().pool())) {
        TrackedWorker w = new TrackedWorker(id, p.handle().pool(), p.handle(), now, ++sequence);
        w.runningSince = p.running() ? now : null;
        w.expiresAt = p.expiresAt();
        w.adopted = true;
        w.adoptedUntil = reattachDeadline(now);
        workers.put(id, w);
        listener.launched(p.handle());
        event(w.pool, "adopted", id, p.handle() + (p.running() ? " running" : " queued")
            + ", left by an earlier runtime of this cluster; waiting for it to register");
      } else {
        event(p.handle().pool(), "orphan", id, p.handle() + " belongs to this cluster but "
            + (policies.containsKey(p.handle().pool()) ? "to no launch of this runtime"
                : "to no configured pool") + ": stopped so that nothing leaks");
        terminate(p.handle()).whenCompleteAsync((ok, error) -> {
          if (error != null) {
            event(p.handle().pool(), "terminate-failed", id, cause(error));
          }
        }, owner);
      }
    }
  }

  private String logHint(TrackedWorker w) {
    WorkerProvider provider = providers.get(w.handle.provider());
    return provider instanceof LocalProvider local ? "; its output: " + local.logOf(w.id) : "";
  }

  @Override
  public List<PoolStatus> status() {
    List<PoolStatus> out = new ArrayList<>();
    Instant now = clock.instant();
    for (ScalingPolicy policy : policies.values()) {
      PoolConfig pool = policy.pool();
      int[] counts = new int[WorkerState.values().length];
      workers.values().stream().filter(w -> w.pool.equals(pool.name()) && !w.terminating)
          .forEach(w -> counts[w.view(now).state().ordinal()]++);
      int launchingNow = (int) launching.values().stream().filter(pool.name()::equals).count();
      Optional<String> problem = policy.backoffUntil().isPresent()
          ? Optional.ofNullable(lastFailure.get(pool.name()))
          : providers.get(pool.provider()).waiting(pool.name());
      out.add(new PoolStatus(pool.name(), pool.provider(),
          counts[WorkerState.STARTING.ordinal()] + launchingNow, counts[WorkerState.IDLE.ordinal()],
          counts[WorkerState.BUSY.ordinal()], counts[WorkerState.DRAINING.ordinal()],
          pool.maxWorkers(), policy.backoffUntil(), problem));
    }
    return out;
  }

  @Override
  public CompletableFuture<Void> shutdown(boolean stopWorkers) {
    stopped = true;
    List<CompletableFuture<Void>> stops = new ArrayList<>();
    if (stopWorkers) {
      for (TrackedWorker w : List.copyOf(workers.values())) {
        w.terminating = true;
        event(w.pool, "terminate", w.id, "the cluster is going down");
        listener.ended(w.handle);
        stops.add(terminate(w.handle).exceptionally(error -> {
          event(w.pool, "terminate-failed", w.id, cause(error));
          return null;
        }));
      }
    }
    return CompletableFuture.allOf(stops.toArray(CompletableFuture[]::new))
        .whenComplete((ok, error) -> providers.values().forEach(WorkerProvider::close));
  }

  private void event(String pool, String kind, String workerId, String message) {
    PoolEvent event = new PoolEvent(clock.instant(), pool, kind, Optional.ofNullable(workerId), message);
    LOG.log(kind.endsWith("failed") || kind.equals("lost") || kind.equals("orphan")
        ? Level.WARNING : Level.INFO, event::toString);
    listener.event(event);
  }

  private static String cause(Throwable error) {
    Throwable cause = error instanceof CompletionException && error.getCause() != null ? error.getCause() : error;
    return cause.getMessage() != null ? cause.getMessage() : cause.toString();
  }
}
