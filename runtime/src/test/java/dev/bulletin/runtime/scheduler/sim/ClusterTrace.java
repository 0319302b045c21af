package dev.bulletin.runtime.scheduler.sim;

import dev.bulletin.runtime.scheduler.policy.PolicyConfig;
import dev.bulletin.runtime.scheduler.policy.PolicyYaml;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

/**
 * The large cluster's trace: 1,000 workers of 8 GPUs (NVLink pairs, two PCIe switches), 200
 * users in 20 groups (the 10th user of each group an intern, submitting a twentieth as much,
 * mostly interactive calls), calls of mixed QoS and size with
 * log-normal run times, Poisson arrivals at a target offered load. Seeded: the same seed gives the
 * same trace for every scheduler.
 */
final class ClusterTrace {
  static final int WORKERS = 1000;
  static final int GPUS_PER_WORKER = 8;
  static final long GIB = 1L << 30;

  /** 20 groups with 600-GPU quotas (12,000 promised on 8,000 GPUs: borrowing matters). */
  static PolicyConfig policy() {
    StringBuilder yaml = new StringBuilder("groups:\n");
    for (int g = 0; g < 20; g++) {
      yaml.append(String.format("  g%02d: {gpus: 600}%n", g));
    }
    yaml.append("limits:\n  intern: {gpus: 2, calls: 4, users: [");
    for (int g = 0; g < 20; g++) {
      yaml.append(g == 0 ? "" : ", ").append(String.format("u%02d9", g));
    }
    yaml.append("]}\n");
    yaml.append("scheduler: {backfill: {}}\n"); // the simulation measures backfill (off by default)
    return PolicyYaml.parse(yaml.toString());
  }

  static List<SimWorker> workers(int count) {
    List<SimWorker> workers = new ArrayList<>(count);
    for (int w = 0; w < count; w++) {
      workers.add(new SimWorker(String.format("n%04d", w), SimWorker.dgxLike(), 64, 512 * GIB,
          32));
    }
    return workers;
  }

  /** {@code count} calls with submit offsets (millis from 0) at {@code load} x capacity. */
  static List<SimCall> calls(int count, long seed, double load, int gpus) {
    SplittableRandom random = new SplittableRandom(seed);
    List<SimCall> calls = new ArrayList<>(count);
    double gpuSeconds = 0;
    for (int i = 0; i < count; i++) {
      int userIndex = random.nextInt(200);
      // Interns submit a twentieth as much as others: about their 2-GPU limit's worth.
      while (userIndex % 10 == 9 && random.nextDouble() < 0.95) {
        userIndex = random.nextInt(200);
      }
      String user = String.format("u%03d", userIndex);
      String group = String.format("g%02d", userIndex / 10);
      boolean intern = userIndex % 10 == 9;
      // Interns mostly work in notebooks: 80% interactive, the rest small batch calls.
      double kind = intern ? random.nextDouble() * 0.5625 : random.nextDouble();
      String qos;
      int size;
      double work;
      Duration walltime;
      double checkpoint;
      if (kind < 0.45) {
        qos = "interactive";
        size = random.nextDouble() < 0.8 ? 1 : 2;
        work = logNormal(random, 300, 1.0, 10, 7000);
        walltime = Duration.ZERO;
        checkpoint = 0;
      } else if (kind < 0.90) {
        qos = "batch";
        double s = random.nextDouble();
        size = s < 0.4 ? 1 : s < 0.65 ? 2 : s < 0.85 ? 4 : 8;
        work = logNormal(random, 2400, 1.0, 60, 5 * 86400);
        walltime = Duration.ofHours(Math.min(168, (long) Math.ceil(2 * work / 3600)));
        checkpoint = 900;
      } else {
        qos = "scavenger";
        size = random.nextDouble() < 0.7 ? 1 : 2;
        work = logNormal(random, 1800, 0.8, 60, 86400);
        walltime = Duration.ofDays(1);
        checkpoint = 600;
      }
      if (intern) {
        size = Math.min(size, 2);
      }
      Map<String, Long> inputs = Map.of();
      if (random.nextDouble() < 0.3) {
        int dataset = (int) (2000 * Math.pow(random.nextDouble(), 2));
        inputs = Map.of("ds" + dataset, (1 + dataset % 16) * GIB);
      }
      long credits = qos.equals("batch") && random.nextDouble() < 0.01 ? 5 : 0;
      calls.add(new SimCall("c" + i, user, group, qos, size, 4.0 * size, 32 * GIB * size, work,
          walltime, inputs, checkpoint, credits));
      gpuSeconds += size * work;
    }
    double horizon = gpuSeconds / (gpus * load);
    double t = 0;
    for (SimCall call : calls) {
      t += -Math.log(1 - random.nextDouble()) * horizon / count;
      call.submitMillis = Math.round(t * 1000);
    }
    return calls;
  }

  static double logNormal(SplittableRandom random, double median, double sigma, double min,
      double max) {
    double gaussian = Math.sqrt(-2 * Math.log(1 - random.nextDouble()))
        * Math.cos(2 * Math.PI * random.nextDouble());
    return Math.max(min, Math.min(max, median * Math.exp(sigma * gaussian)));
  }
}
