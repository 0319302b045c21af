package dev.bulletin.runtime.scheduler.sim;

import dev.bulletin.runtime.scheduler.Demand;
import dev.bulletin.runtime.scheduler.WorkerSlots;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.BiConsumer;

/**
 * Simulation 2: the lab week of {@link LabTrace} shared two ways. "bulletin": every GPU call is
 * placed by the policy scheduler when it is made and holds its GPU only while it runs. "hold":
 * how labs share today, each notebook session takes one GPU when it opens (first come, first
 * fit) and keeps it until it closes, running its calls one after another on it; batch runs and
 * the sweep's calls take GPUs the same way for as long as they run.
 */
final class LabWeek {
  static final long T0 = 1_700_000_000_000L;
  private static final long GIB = 1L << 30;

  /** What one way of sharing produced. */
  static final class Result {
    final String name;
    final List<SimCall> calls = new ArrayList<>();
    final List<Double> firstResults = new ArrayList<>();
    double heldIdleGpuSeconds;
    /** "hold" only: GPU-seconds each group's notebook sessions held their GPU. */
    final Map<String, Double> sessionGpuSeconds = new java.util.HashMap<>();
    int preemptions;
    /** "bulletin, resident" only: where each session's next cell found its state. */
    ResidentSessions resident;

    Result(String name) {
      this.name = name;
    }
  }

  /** A notebook cell being run: its calls, when it was run, when its first result came. */
  private static final class CellRun {
    final long submitMillis;
    int left;
    boolean first = true;
    Runnable whenDone;

    CellRun(long submitMillis, int calls) {
      this.submitMillis = submitMillis;
      this.left = calls;
    }
  }

  private LabWeek() {}

  private static SimCall notebookCall(String id, LabTrace.Session session, double seconds) {
    return new SimCall(id, session.user(), session.group(), "interactive", 1, 4, 16 * GIB,
        seconds, Duration.ZERO, Map.of(), 0, 0);
  }

  private static SimCall batchCall(LabTrace.Batch batch) {
    return new SimCall(batch.id(), batch.user(), batch.group(), "batch", batch.gpus(),
        4.0 * batch.gpus(), 32 * GIB * batch.gpus(), batch.seconds(), batch.walltime(),
        Map.of(), batch.checkpointEvery(), 0);
  }

  /** Every call through the policy scheduler, a pass on every change. */
  static Result bulletin(LabTrace trace, long seed) {
    return bulletin("bulletin", trace, seed, LabTrace.policy());
  }

  static Result bulletin(String name, LabTrace trace, long seed,
      dev.bulletin.runtime.scheduler.policy.PolicyConfig policy) {
    return bulletin(name, trace, seed, policy, null);
  }

  /** "bulletin, resident": sessions keep GPU state between cells ({@link ResidentSessions}). */
  static Result resident(String name, LabTrace trace, long seed, ResidentSessions.Mode mode) {
    return resident(name, trace, seed, mode, ResidentSessions.SESSION_BYTES);
  }

  static Result resident(String name, LabTrace trace, long seed, ResidentSessions.Mode mode,
      long bytes) {
    return bulletin(name, trace, seed, LabTrace.policy(), new ResidentSessions(mode, bytes));
  }

  private static Result bulletin(String name, LabTrace trace, long seed,
      dev.bulletin.runtime.scheduler.policy.PolicyConfig policy, ResidentSessions resident) {
    Result result = new Result(name);
    result.resident = resident;
    Des des = new Des(T0);
    List<SimWorker> workers = LabTrace.workers();
    PolicyDriver driver = new PolicyDriver(des, workers, policy, seed, 0,
        Duration.ofDays(1), System::nanoTime);
    driver.timer(5);
    if (resident != null) {
      resident.attach(workers);
      driver.startCost = resident::started;
    }
    driver.onDone = call -> {
      if (resident != null) {
        resident.finished(call);
      }
      CellRun cell = (CellRun) call.cell;
      if (cell != null) {
        cellCallDone(des, result, cell);
      }
    };
    int[] ids = {0, 0};
    for (LabTrace.Session session : trace.sessions) {
      ResidentSessions.State state = new ResidentSessions.State("session-" + ids[1]++);
      des.at(T0 + session.startMillis(), () -> notebook(des, session, session.cells().iterator(),
          (cell, calls) -> {
            double[] seconds = cell.callSeconds();
            for (int c = 0; c < seconds.length; c++) {
              SimCall call = notebookCall("nb" + ids[0]++, session, seconds[c]);
              call.cell = calls;
              if (resident != null && c == 0) {
                resident.carry(call, state);
              }
              result.calls.add(call);
              driver.submit(call);
            }
          }));
    }
    for (LabTrace.Batch batch : trace.batches) {
      SimCall call = batchCall(batch);
      result.calls.add(call);
      des.at(T0 + batch.submitMillis(), () -> driver.submit(call));
    }
    des.run(Long.MAX_VALUE);
    result.preemptions = driver.preemptions;
    result.heldIdleGpuSeconds = driver.heldGpuSeconds() - driver.busyGpuSeconds;
    return result;
  }

  private static void cellCallDone(Des des, Result result, CellRun cell) {
    if (cell.first) {
      cell.first = false;
      result.firstResults.add((des.now() - cell.submitMillis) / 1000.0);
    }
    if (--cell.left == 0) {
      cell.whenDone.run();
    }
  }

  /** The user's loop: think, run a cell, wait for all its results; stop once time is up. */
  private static void notebook(Des des, LabTrace.Session session, Iterator<LabTrace.Cell> cells,
      BiConsumer<LabTrace.Cell, CellRun> run) {
    if (des.now() >= T0 + session.endMillis() || !cells.hasNext()) {
      return;
    }
    LabTrace.Cell cell = cells.next();
    des.after(cell.thinkSeconds(), () -> {
      CellRun calls = new CellRun(des.now(), cell.callSeconds().length);
      calls.whenDone = () -> notebook(des, session, cells, run);
      run.accept(cell, calls);
    });
  }

  /** First-come first-fit GPU holding: the FIFO baseline's FirstFitScheduler over WorkerSlots. */
  private static final class Holder {
    final Des des;
    final List<WorkerSlots> slots = new ArrayList<>();
    final FirstFitScheduler scheduler = new FirstFitScheduler();
    final List<Object[]> waiting = new ArrayList<>();

    Holder(Des des) {
      this.des = des;
      for (SimWorker worker : LabTrace.workers()) {
        slots.add(new WorkerSlots(worker.id, worker.topology.gpus(), true, worker.cpus,
            worker.memory));
      }
    }

    void request(Demand demand, java.util.function.Consumer<Decision.Placed> granted) {
      waiting.add(new Object[] {demand, granted});
      grant();
    }

    @SuppressWarnings("unchecked")
    void grant() {
      for (Iterator<Object[]> it = waiting.iterator(); it.hasNext(); ) {
        Object[] request = it.next();
        Demand demand = (Demand) request[0];
        if (scheduler.decide(demand, slots) instanceof Decision.Placed placed) {
          slot(placed).reserve(demand, placed.gpuIds());
          it.remove();
          ((java.util.function.Consumer<Decision.Placed>) request[1]).accept(placed);
        }
      }
    }

    WorkerSlots slot(Decision.Placed placed) {
      return slots.stream().filter(s -> s.workerId().equals(placed.workerId())).findFirst()
          .orElseThrow();
    }

    void release(Demand demand, Decision.Placed placed) {
      slot(placed).free(demand, placed.gpuIds());
      des.after(0, this::grant);
    }
  }

  /** Each session holds one GPU from when it opens until it closes. */
  static Result hold(LabTrace trace) {
    Result result = new Result("hold");
    Des des = new Des(T0);
    Holder holder = new Holder(des);
    Demand sessionGpu = new Demand(1, 4, 16 * GIB);
    int[] ids = {0, 0};
    for (LabTrace.Session session : trace.sessions) {
      des.at(T0 + session.startMillis(), () -> {
        long[] grantedAt = {-1};
        double[] busy = {0};
        Decision.Placed[] gpu = {null};
        List<Runnable> pending = new ArrayList<>();
        holder.request(sessionGpu, placed -> {
          gpu[0] = placed;
          grantedAt[0] = des.now();
          pending.forEach(Runnable::run);
          pending.clear();
        });
        Iterator<LabTrace.Cell> cells = session.cells().iterator();
        Runnable[] close = new Runnable[1];
        close[0] = () -> {
          if (gpu[0] == null) {
            pending.add(close[0]);
            return;
          }
          holder.release(sessionGpu, gpu[0]);
          result.heldIdleGpuSeconds += (des.now() - grantedAt[0]) / 1000.0 - busy[0];
          result.sessionGpuSeconds.merge(session.group(), (des.now() - grantedAt[0]) / 1000.0,
              Double::sum);
        };
        notebookHeld(des, session, cells, result, ids, gpu, pending, busy, close[0]);
      });
    }
    for (LabTrace.Batch batch : trace.batches) {
      SimCall call = batchCall(batch);
      result.calls.add(call);
      Demand demand = new Demand(call.gpus, call.cpus, call.memory);
      des.at(T0 + batch.submitMillis(), () -> {
        call.submitMillis = des.now();
        holder.request(demand, placed -> {
          call.firstStartMillis = des.now();
          des.after(call.work, () -> {
            call.endMillis = des.now();
            holder.release(demand, placed);
          });
        });
      });
    }
    des.run(Long.MAX_VALUE);
    return result;
  }

  /** The notebook loop when the session holds its GPU: a cell's calls run one by one on it. */
  private static void notebookHeld(Des des, LabTrace.Session session,
      Iterator<LabTrace.Cell> cells, Result result, int[] ids, Decision.Placed[] gpu,
      List<Runnable> pending, double[] busy, Runnable close) {
    if (des.now() >= T0 + session.endMillis() || !cells.hasNext()) {
      close.run();
      return;
    }
    LabTrace.Cell cell = cells.next();
    des.after(cell.thinkSeconds(), () -> {
      long submitted = des.now();
      List<SimCall> calls = new ArrayList<>();
      for (double seconds : cell.callSeconds()) {
        SimCall call = notebookCall("nb" + ids[0]++, session, seconds);
        call.submitMillis = submitted;
        calls.add(call);
        result.calls.add(call);
      }
      Runnable runAll = () -> runSequentially(des, calls, 0, submitted, result, busy,
          () -> notebookHeld(des, session, cells, result, ids, gpu, pending, busy, close));
      if (gpu[0] != null) {
        runAll.run();
      } else {
        pending.add(runAll);
      }
    });
  }

  private static void runSequentially(Des des, List<SimCall> calls, int index, long submitted,
      Result result, double[] busy, Runnable done) {
    if (index == calls.size()) {
      done.run();
      return;
    }
    SimCall call = calls.get(index);
    call.firstStartMillis = des.now();
    des.after(call.work, () -> {
      call.endMillis = des.now();
      busy[0] += call.work;
      if (index == 0) {
        result.firstResults.add((des.now() - submitted) / 1000.0);
      }
      runSequentially(des, calls, index + 1, submitted, result, busy, done);
    });
  }

  /**
   * Per group, the share of its calls' response time (submit to result) spent running: 1 when
   * nothing waited. Jain's index over these says whether some group waits more than others.
   */
  static double[] serviceRatios(List<SimCall> calls) {
    double[] ratios = new double[LabTrace.GROUPS.length];
    for (int g = 0; g < ratios.length; g++) {
      double run = 0;
      double response = 0;
      for (SimCall c : calls) {
        if (c.group.equals(LabTrace.GROUPS[g])) {
          run += c.work;
          response += (c.endMillis - c.submitMillis) / 1000.0;
        }
      }
      ratios[g] = response == 0 ? 1 : run / response;
    }
    return ratios;
  }

  /** The ways compared: "bulletin", "lend all", "bulletin, resident", "hold". */
  static List<Result> ways(LabTrace trace, long seed) {
    return List.of(bulletin(trace, seed),
        bulletin("lend all", trace, seed,
            dev.bulletin.runtime.scheduler.policy.PolicyYaml.parse(LabTrace.DEFAULT_LENDING)),
        resident("resident", trace, seed, ResidentSessions.Mode.GPU), hold(trace));
  }

  static String compare(LabTrace trace, List<Result> results) {
    String[] labels = {"sharing", "GPU-hours held idle", "GPU-hours of useful work",
        "utilisation while demand exists", "p50 time to first result", "p95 time to first result",
        "p50 notebook call wait", "p95 notebook call wait",
        "Jain's index, all calls", "Jain's index, notebook calls", "sweep done after",
        "longest batch run done after", "preemptions", "GPU-hours lost to preemption",
        "notebook calls", "sessions"};
    List<String[]> columns = new ArrayList<>();
    for (Result r : results) {
      List<SimCall> done = r.calls.stream().filter(SimCall::done).toList();
      List<SimCall> notebook = done.stream().filter(c -> c.id.startsWith("nb")).toList();
      double useful = done.stream().mapToDouble(c -> c.gpus * c.work).sum();
      double demand = Stats.demandGpuSeconds(done, 16);
      double lost = done.stream().mapToDouble(c -> c.lostGpuSeconds).sum() / 3600;
      double[] firsts = r.firstResults.stream().mapToDouble(Double::doubleValue).toArray();
      long sweepEnd = done.stream().filter(c -> c.id.startsWith("sweep"))
          .mapToLong(c -> c.endMillis).max().orElse(0);
      long sweepStart = done.stream().filter(c -> c.id.startsWith("sweep"))
          .mapToLong(c -> c.submitMillis).min().orElse(0);
      double longestRun = done.stream().filter(c -> c.id.startsWith("run"))
          .mapToDouble(c -> (c.endMillis - c.submitMillis) / 1000.0).max().orElse(0);
      columns.add(new String[] {r.name,
          String.format(Locale.ROOT, "%.1f", Math.max(0, r.heldIdleGpuSeconds) / 3600),
          String.format(Locale.ROOT, "%.1f", useful / 3600),
          ClusterBench.pct(useful / demand),
          Stats.minutes(Stats.percentile(firsts, 50)), Stats.minutes(Stats.percentile(firsts, 95)),
          Stats.minutes(Stats.percentile(Stats.of(notebook, SimCall::waitSeconds), 50)),
          Stats.minutes(Stats.percentile(Stats.of(notebook, SimCall::waitSeconds), 95)),
          String.format(Locale.ROOT, "%.3f", Stats.jain(serviceRatios(done))),
          String.format(Locale.ROOT, "%.3f", Stats.jain(serviceRatios(notebook))),
          Stats.minutes((sweepEnd - sweepStart) / 1000.0), Stats.minutes(longestRun),
          String.valueOf(r.preemptions), String.format(Locale.ROOT, "%.1f", lost),
          String.valueOf(notebook.size()),
          String.valueOf(trace.sessions.size())});
    }
    StringBuilder out = new StringBuilder();
    for (int row = 0; row < labels.length; row++) {
      out.append(String.format(Locale.ROOT, "%-34s", labels[row]));
      for (String[] column : columns) {
        out.append(String.format(Locale.ROOT, " %-14s", column[row]));
      }
      out.append('\n');
    }
    return out.toString();
  }
}
