package dev.bulletin.runtime.metrics;

import dev.bulletin.bridge.StoreArena;
import dev.bulletin.bridge.StoreStats;
import dev.bulletin.runtime.control.ControlPlane;
import dev.bulletin.runtime.pool.PoolStatus;
import dev.bulletin.runtime.workers.AttachedWorker;
import dev.bulletin.runtime.workers.PoolRunner;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import java.time.Duration;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;

/**
 * The cluster's state as meters: GPUs total and reserved per worker ({@code bulletin_gpus{worker,
 * state}}; the usage ledger adds {@code state="busy"} from utilisation samples), the object store
 * ({@code bulletin_store_objects}, {@code bulletin_store_bytes{tier}}), the memory its arena
 * holds pre-faulted ({@code bulletin_store_arena_bytes{state}}: what the arena costs the
 * machine) and its handouts, data-port bytes, pool
 * workers by state and the scheduler's pass time.
 *
 * <p>{@link #refresh} copies the control plane's numbers into plain fields that the gauges
 * read, and adds or removes the gauges of workers that came or went: it runs on the control
 * plane's event loop before every scrape and every history sample, so no gauge reads the plane
 * from another thread, and the store's statistics are taken once per scrape, not once per gauge.
 */
public final class ClusterMeters {
  public static final String GPUS = "bulletin.gpus";
  public static final String POOL_WORKERS = "bulletin.pool.workers";
  public static final String PASS = "bulletin.scheduler.pass";
  private static final String[] POOL_STATES = {"starting", "idle", "busy", "draining"};

  private final MeterRegistry registry;
  private final ControlPlane plane;
  private final PoolRunner pools;
  private final Map<String, WorkerGpus> workers = new HashMap<>();
  private final Map<String, int[]> poolCounts = new HashMap<>();
  private volatile StoreStats store = new StoreStats(0, 0, 0, 0, 0, 0, 0);
  private volatile StoreArena.Stats arena = new StoreArena.Stats(0, 0, 0, 0, 0);
  private volatile long dataPortBytes;
  private final Timer pass;

  /** One worker's GPU counts and the two gauges that read them. */
  private static final class WorkerGpus {
    volatile int total;
    /** A GPU shared by fractional calls counts as the shares held (0.5 for two quarters). */
    volatile double reserved;
    final List<Meter> meters;

    WorkerGpus(MeterRegistry registry, String workerId) {
      meters = List.of(gauge(registry, workerId, "total", gpus -> gpus.total),
          gauge(registry, workerId, "reserved", gpus -> gpus.reserved));
    }

    private Meter gauge(MeterRegistry registry, String workerId, String state,
        java.util.function.ToDoubleFunction<WorkerGpus> value) {
      return Gauge.builder(GPUS, this, value)
          .description("GPUs of a worker: total, reserved by calls, busy by utilisation")
          .tag("worker", workerId).tag("state", state).strongReference(true).register(registry);
    }
  }

  /** @param pools the pools' runner, or null when the config has none */
  public ClusterMeters(MeterRegistry registry, ControlPlane plane, PoolRunner pools) {
    this.registry = registry;
    this.plane = plane;
    this.pools = pools;
    Gauge.builder("bulletin.store.objects", this, meters -> meters.store.objects())
        .description("Objects in the runtime's object store").register(registry);
    Gauge.builder("bulletin.store.bytes", this, meters -> meters.store.memoryBytes())
        .description("Bytes of the object store, in memory or spilled to disk")
        .tag("tier", "memory").baseUnit("bytes").register(registry);
    Gauge.builder("bulletin.store.bytes", this, meters -> meters.store.spilledBytes())
        .description("Bytes of the object store, in memory or spilled to disk")
        .tag("tier", "spilled").baseUnit("bytes").register(registry);
    Gauge.builder("bulletin.store.capacity", this, meters -> meters.store.capacityBytes())
        .description("The object store's memory capacity").baseUnit("bytes").register(registry);
    Gauge.builder("bulletin.store.arena.bytes", this, meters -> meters.arena.pooledBytes())
        .description("Pre-faulted memory of the store's arena: pooled, or handed to a writer"
            + " and not used yet").tag("state", "pooled").baseUnit("bytes").register(registry);
    Gauge.builder("bulletin.store.arena.bytes", this, meters -> meters.arena.handedOutBytes())
        .description("Pre-faulted memory of the store's arena: pooled, or handed to a writer"
            + " and not used yet").tag("state", "handed_out").baseUnit("bytes")
        .register(registry);
    FunctionCounter.builder("bulletin.store.arena.handouts", this,
        meters -> meters.arena.handOuts())
        .description("Arena files handed to writers (spares and executors' results)")
        .register(registry);
    FunctionCounter.builder("bulletin.store.arena.given.back", this,
        meters -> meters.arena.givenBack())
        .description("Arena files deleted to give their memory back (pressure, or a larger file)")
        .register(registry);
    FunctionCounter.builder("bulletin.dataport", this, meters -> meters.dataPortBytes)
        .description("Bytes moved over the bulk data port, up and down").baseUnit("bytes")
        .register(registry);
    pass = passTimer(registry);
  }

  /** {@code bulletin_scheduler_pass_seconds}: buckets from 10 µs to 1 s. */
  static Timer passTimer(MeterRegistry registry) {
    return Timer.builder(PASS).description("Time of a scheduling pass (a run of passes)")
        .serviceLevelObjectives(Duration.ofNanos(10_000), Duration.ofNanos(100_000),
            Duration.ofMillis(1), Duration.ofMillis(10), Duration.ofMillis(100),
            Duration.ofSeconds(1))
        .register(registry);
  }

  /** Records one run of scheduling passes (the control plane calls it after each). */
  public void passTook(long nanos) {
    pass.record(nanos, TimeUnit.NANOSECONDS);
  }

  /** Copies the plane's numbers for the gauges; on the control plane's event loop. */
  public void refresh() {
    store = plane.store().stats();
    StoreArena hostArena = plane.store().arena();
    if (hostArena != null) {
      arena = hostArena.stats();
    }
    dataPortBytes = plane.objects().dataPortBytes();
    refreshGpus();
    if (pools != null) {
      for (PoolStatus pool : pools.status()) {
        int[] counts = poolCounts.computeIfAbsent(pool.pool(), this::poolGauges);
        counts[0] = pool.starting();
        counts[1] = pool.idle();
        counts[2] = pool.busy();
        counts[3] = pool.draining();
      }
    }
  }

  /**
   * Only the workers' GPU gauges (what the dashboard's chart samples every few seconds: the
   * store's statistics walk every object, and are taken only when scraped).
   */
  public void refreshGpus() {
    Set<String> attached = new HashSet<>();
    for (AttachedWorker worker : plane.workers()) {
      attached.add(worker.id());
      WorkerGpus gpus = workers.computeIfAbsent(worker.id(), id -> new WorkerGpus(registry, id));
      gpus.total = worker.slots().gpus();
      gpus.reserved = worker.slots().reservedGpuShare();
    }
    workers.entrySet().removeIf(entry -> {
      if (attached.contains(entry.getKey())) {
        return false;
      }
      entry.getValue().meters.forEach(registry::remove); // a gone worker leaves no series
      return true;
    });
  }

  private int[] poolGauges(String pool) {
    int[] counts = new int[POOL_STATES.length];
    for (int i = 0; i < POOL_STATES.length; i++) {
      int index = i;
      Gauge.builder(POOL_WORKERS, counts, values -> values[index])
          .description("Workers of a pool, by state").tag("pool", pool)
          .tag("state", POOL_STATES[i]).strongReference(true).register(registry);
    }
    return counts;
  }
}
