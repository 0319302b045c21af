package dev.bulletin.runtime.workers;

import dev.bulletin.runtime.control.ControlPlane;
import dev.bulletin.runtime.control.PoolOutlook;
import dev.bulletin.runtime.pool.Autoscaler;
import dev.bulletin.runtime.pool.PendingDemand;
import dev.bulletin.runtime.pool.PoolConfig;
import dev.bulletin.runtime.pool.PoolEvent;
import dev.bulletin.runtime.pool.PoolListener;
import dev.bulletin.runtime.pool.PoolStatus;
import dev.bulletin.runtime.pool.PoolsConfig;
import dev.bulletin.runtime.pool.RegisteredWorker;
import dev.bulletin.runtime.scheduler.Demand;
import dev.bulletin.runtime.scheduler.WorkerCapacity;
import dev.bulletin.runtime.task.Task;
import java.time.Instant;
import java.time.ZoneId;
import java.time.format.DateTimeFormatter;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * Connects the control plane to the pools' autoscaler: every tick it reports the pool workers
 * attached and the calls no worker has room for, and it carries out what the autoscaler asks
 * (drain a worker, forget one being stopped). Runs on the control plane's event loop.
 */
public final class PoolRunner implements PoolListener, PoolOutlook {

  public static final long TICK_MILLIS = 1_000;
  private static final DateTimeFormatter CLOCK_TIME = DateTimeFormatter.ofPattern("HH:mm:ss")
      .withZone(ZoneId.systemDefault());
  private static final int RECENT_EVENTS = 20;

  private final ControlPlane plane;
  private final PoolsConfig pools;
  private final Deque<PoolEvent> recent = new ArrayDeque<>();
  private Autoscaler autoscaler;
  /** The pools as of the last tick, by name: what waiting calls are told about them. */
  private Map<String, PoolStatus> statuses = Map.of();

  public PoolRunner(ControlPlane plane, PoolsConfig pools) {
    this.plane = plane;
    this.pools = pools;
    // A call that only a pool's worker could run waits for one rather than failing at once.
    List<WorkerCapacity> shapes = new ArrayList<>();
    for (PoolConfig pool : pools.pools()) {
      if (pool.maxWorkers() > 0) {
        shapes.add(new WorkerCapacity(pool.worker().gpus(), false, pool.worker().cpus(),
            pool.worker().memory().orElse(Long.MAX_VALUE)));
      }
    }
    plane.potentialWorkers(shapes);
    plane.poolOutlook(this);
  }

  public void start(Autoscaler autoscaler) {
    this.autoscaler = autoscaler;
  }

  /** One round: what the pools have and what waits for them. */
  public void tick() {
    if (autoscaler == null) {
      return;
    }
    List<RegisteredWorker> registered = new ArrayList<>();
    for (AttachedWorker worker : plane.workers()) {
      if (!worker.pool().isEmpty()) {
        registered.add(new RegisteredWorker(worker.id(), worker.runningCalls(),
            worker.idleSince(), worker.expiresAt() > 0
                ? Optional.of(Instant.ofEpochMilli((long) (worker.expiresAt() * 1000)))
                : Optional.empty()));
      }
    }
    autoscaler.tick(registered, unservable());
    Map<String, PoolStatus> now = new LinkedHashMap<>();
    for (PoolStatus status : autoscaler.status()) {
      now.put(status.pool(), status);
    }
    if (!now.equals(statuses)) {
      statuses = now;
      plane.poolsChanged();
    }
  }

  /**
   * The first pool (in the config's order) whose workers fit the call: whether it starts one,
   * or why it cannot. Counts and the provider's words are as of the last tick.
   */
  @Override
  public Optional<String> forDemand(Demand demand) {
    for (PoolConfig pool : pools.pools()) {
      PoolStatus status = statuses.get(pool.name());
      if (status != null && pool.worker().fits(asked(demand, 1))) {
        return Optional.of(outlook(status));
      }
    }
    return Optional.empty();
  }

  /** What {@code count} calls of this size ask of the pools: a share of a GPU asks for a GPU. */
  private static PendingDemand asked(Demand size, int count) {
    return new PendingDemand(size.gpusTouched(), size.cpus(), size.memoryBytes(), count);
  }

  private static String outlook(PoolStatus status) {
    String pool = "pool " + status.pool();
    if (status.backoffUntil().isPresent()) {
      // A moment, not "in 5s": the words stay the same from pass to pass, so they are told once.
      return pool + " cannot start a worker now (next attempt at "
          + CLOCK_TIME.format(status.backoffUntil().get()) + ")"
          + status.problem().map(why -> ": " + why).orElse("");
    }
    if (status.starting() > 0) {
      return pool + " is starting " + (status.starting() == 1 ? "a worker"
          : status.starting() + " workers") + status.problem().map(why -> ": " + why).orElse("");
    }
    int held = status.starting() + status.idle() + status.busy() + status.draining();
    if (held >= status.maxWorkers()) {
      return pool + " runs its most workers (max_workers " + status.maxWorkers() + "), all busy";
    }
    return pool + " starts a worker for it at its next round";
  }

  /** Queued calls that no attached worker could take now, by size. */
  private List<PendingDemand> unservable() {
    double now = System.currentTimeMillis() / 1000.0;
    Map<Demand, Integer> bySize = new LinkedHashMap<>();
    for (Task task : plane.tasks().queuedView()) {
      boolean fitsSomewhere = AttachedWorker.whereItCanFinish(task, plane.workers(), now,
          plane.drainMarginSeconds()).stream()
          .anyMatch(slots -> slots.fitsNow(task.demand()));
      if (!fitsSomewhere) {
        bySize.merge(task.demand(), 1, Integer::sum);
      }
    }
    List<PendingDemand> demand = new ArrayList<>();
    bySize.forEach((size, count) -> demand.add(asked(size, count)));
    return demand;
  }

  public List<PoolStatus> status() {
    return autoscaler == null ? List.of() : autoscaler.status();
  }

  public List<PoolEvent> recentEvents() {
    return List.copyOf(recent);
  }

  @Override
  public void drain(String workerId, String reason) {
    plane.worker(workerId).ifPresent(worker -> worker.drain(reason));
  }

  @Override
  public void stopping(String workerId, String reason) {
    plane.forget(workerId, "worker " + workerId + " left its pool: " + reason);
  }

  @Override
  public void launched(dev.bulletin.runtime.pool.WorkerHandle handle) {
    plane.journaling().poolWorker(PoolJournal.record(handle, true));
  }

  @Override
  public void ended(dev.bulletin.runtime.pool.WorkerHandle handle) {
    plane.journaling().poolWorker(PoolJournal.record(handle, false));
  }

  @Override
  public void event(PoolEvent event) {
    // The autoscaler logs its events; the runner keeps the latest for status.
    recent.addLast(event);
    while (recent.size() > RECENT_EVENTS) {
      recent.removeFirst();
    }
  }
}
