package dev.bulletin.runtime.scheduler.sim;

import dev.bulletin.runtime.scheduler.policy.PolicyConfig;
import dev.bulletin.runtime.scheduler.policy.PolicyYaml;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

/**
 * A lab's week on 16 GPUs (two 8-GPU boxes): 20 users in 4 groups. Every weekday most users open
 * one or two notebook sessions of 1-4 hours; in a session they think (exponential, mean
 * 5 minutes), then run a cell that calls one GPU function (70%) or maps one over 2-8 inputs
 * (30%), each call taking tens of seconds to minutes, and think again once the cell's results
 * are back. Three users start long batch runs (20-48 hours, 1-4 GPUs, checkpointing every 30
 * minutes), and one user launches a sweep of 120 one-GPU 20-minute calls on Thursday morning.
 * Cells are drawn up front, so both ways of sharing replay the same work.
 */
final class LabTrace {
  static final long DAY = 86_400_000L;
  static final long HOUR = 3_600_000L;
  static final String[] GROUPS = {"vision", "nlp", "robotics", "bio"};

  record Cell(double thinkSeconds, double[] callSeconds) {}

  record Session(String user, String group, long startMillis, long endMillis, List<Cell> cells) {}

  record Batch(String id, String user, String group, int gpus, double seconds, long submitMillis,
      Duration walltime, double checkpointEvery) {}

  final List<Session> sessions = new ArrayList<>();
  final List<Batch> batches = new ArrayList<>();

  static String user(int i) {
    return String.format("u%02d", i);
  }

  static String groupOf(int i) {
    return GROUPS[(i - 1) / 5];
  }

  /**
   * The lab's config: four groups with a quarter of the GPUs each; over-quota work borrows idle
   * GPUs, but each group lends at most 2 of its idle 4, keeping 2 free for its own next calls.
   */
  static final String LAB_POLICY = """
      groups:
        vision:   {gpus: 4, lend: 2}
        nlp:      {gpus: 4, lend: 2}
        robotics: {gpus: 4, lend: 2}
        bio:      {gpus: 4, lend: 2}
      """;

  /** The same quotas with every other setting at its default (groups lend all idle GPUs). */
  static final String DEFAULT_LENDING = """
      groups:
        vision:   {gpus: 4}
        nlp:      {gpus: 4}
        robotics: {gpus: 4}
        bio:      {gpus: 4}
      """;

  static PolicyConfig policy() {
    return PolicyYaml.parse(LAB_POLICY);
  }

  static List<SimWorker> workers() {
    return List.of(new SimWorker("box1", SimWorker.dgxLike(), 64, 512L << 30, 32),
        new SimWorker("box2", SimWorker.dgxLike(), 64, 512L << 30, 32));
  }

  static LabTrace generate(long seed) {
    return generate(seed, 5);
  }

  /** The first {@code weekdays} days of the week (the smoke test runs one). */
  static LabTrace generate(long seed, int weekdays) {
    SplittableRandom random = new SplittableRandom(seed);
    LabTrace trace = new LabTrace();
    for (int day = 0; day < weekdays; day++) {
      for (int u = 1; u <= 20; u++) {
        double r = random.nextDouble();
        int count = r < 0.1 ? 0 : r < 0.7 ? 1 : 2;
        long start = day * DAY + 9 * HOUR + (long) (random.nextDouble() * 6 * HOUR);
        for (int s = 0; s < count; s++) {
          long length = (long) ((1 + 3 * random.nextDouble()) * HOUR);
          trace.sessions.add(new Session(user(u), groupOf(u), start, start + length,
              cells(random, length)));
          start += length + (long) ((0.5 + random.nextDouble()) * HOUR);
        }
      }
    }
    trace.batches.add(new Batch("run-u03", user(3), groupOf(3), 2, 20 * 3600, 18 * HOUR,
        Duration.ofDays(3), 1800));
    trace.batches.add(new Batch("run-u08", user(8), groupOf(8), 4, 30 * 3600, DAY + 20 * HOUR,
        Duration.ofDays(3), 1800));
    trace.batches.add(new Batch("run-u14", user(14), groupOf(14), 1, 48 * 3600,
        2 * DAY + 12 * HOUR, Duration.ofDays(3), 1800));
    for (int i = 0; i < 120; i++) {
      trace.batches.add(new Batch("sweep-" + i, user(17), groupOf(17), 1, 20 * 60,
          3 * DAY + 10 * HOUR, Duration.ofHours(1), 0));
    }
    trace.batches.removeIf(batch -> batch.submitMillis() >= weekdays * DAY);
    return trace;
  }

  private static List<Cell> cells(SplittableRandom random, long lengthMillis) {
    List<Cell> cells = new ArrayList<>();
    double planned = 0;
    // Twice the session's length of cells: a session ends by the clock, not by running out.
    while (planned < 2 * lengthMillis / 1000.0) {
      double think = Math.max(20, -Math.log(1 - random.nextDouble()) * 300);
      int calls = random.nextDouble() < 0.7 ? 1 : 2 + random.nextInt(7);
      double[] seconds = new double[calls];
      for (int c = 0; c < calls; c++) {
        seconds[c] = ClusterTrace.logNormal(random, calls == 1 ? 40 : 60, 1.0, 3, 1200);
        planned += seconds[c];
      }
      planned += think;
      cells.add(new Cell(think, seconds));
    }
    return cells;
  }
}
