package dev.bulletin.runtime.scheduler;

import static dev.bulletin.runtime.scheduler.Builders.aCall;
import static dev.bulletin.runtime.scheduler.Builders.aRunningCall;
import static dev.bulletin.runtime.scheduler.Builders.aSnapshot;
import static dev.bulletin.runtime.scheduler.Builders.aWorker;
import static dev.bulletin.runtime.scheduler.Builders.scheduler;
import static dev.bulletin.runtime.scheduler.Builders.secondsAgo;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.runtime.scheduler.plan.Plan;
import dev.bulletin.runtime.scheduler.plan.Rejection;
import dev.bulletin.runtime.scheduler.snapshot.QueuedCall;
import dev.bulletin.runtime.scheduler.snapshot.RunningCall;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.SplittableRandom;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

/**
 * A pass asked to explain nothing (a refill pass that left users out) decides what the same
 * pass with explanations decides: placements, preemptions, rejections and the next revisit. It
 * stops walking the queue in fair-share order once nothing more can fit, so the calls behind
 * that point are decided out of order: these are the cases where that could show.
 */
class QuietPassTest {

  @Test
  void aFullClusterStillRejectsAndRevisitsTheCallsBehindTheLastPlacement() {
    Supplier<Builders.SnapshotBuilder> cluster = () -> aSnapshot()
        .workers(aWorker().id("w1").gpus(2))
        .queue(aCall().id("a").submittedAt(secondsAgo(90)),
            aCall().id("b").submittedAt(secondsAgo(80)),
            aCall().id("c").submittedAt(secondsAgo(70)),
            aCall().id("sixteen").gpus(16).submittedAt(secondsAgo(60)),
            aCall().id("turbo").qos("turbo").submittedAt(secondsAgo(50)),
            aCall().id("fresh").submittedAt(secondsAgo(0)));
    Plan explained = scheduler().plan(cluster.get().build());
    Plan quiet = scheduler().plan(cluster.get().withoutExplanations().build());
    assertSameDecisions(explained, quiet, "full cluster");
    assertEquals(List.of("sixteen", "turbo"), rejected(quiet));
    assertTrue(quiet.revisitAt().isPresent(), "fresh turns old enough to explain");
  }

  @Test
  void randomClustersAndQueuesAreDecidedAlikeWithAndWithoutExplanations() {
    SplittableRandom random = new SplittableRandom(30);
    for (int round = 0; round < 400; round++) {
      long seed = random.nextLong();
      Plan explained = scheduler().plan(randomSnapshot(seed).build());
      Plan quiet = scheduler().plan(randomSnapshot(seed).withoutExplanations().build());
      assertSameDecisions(explained, quiet, "round " + round);
    }
  }

  /**
   * One to three workers, some of their GPUs taken by running calls (some preemptible), and a
   * queue of several users' calls: mostly one whole GPU, some larger than any worker, some
   * fractional or CPU-only, some of an unknown class or of the preemptible batch class.
   */
  private static Builders.SnapshotBuilder randomSnapshot(long seed) {
    SplittableRandom random = new SplittableRandom(seed);
    List<Builders.WorkerBuilder> workers = new ArrayList<>();
    List<RunningCall.Builder> running = new ArrayList<>();
    int workerCount = 1 + random.nextInt(3);
    for (int w = 0; w < workerCount; w++) {
      int gpus = 1 + random.nextInt(4);
      workers.add(aWorker().id("w" + w).gpus(gpus));
      for (int g = 0; g < gpus; g++) {
        if (random.nextInt(10) < 7) {
          running.add(aRunningCall().id("r" + w + "-" + g).on("w" + w, g)
              .user("u" + random.nextInt(3)).qos(random.nextBoolean() ? "batch" : "interactive")
              .preemptible(random.nextInt(4) == 0));
        }
      }
    }
    List<QueuedCall.Builder> queue = new ArrayList<>();
    int calls = 1 + random.nextInt(12);
    for (int i = 0; i < calls; i++) {
      QueuedCall.Builder call = aCall().id("q" + i).user("u" + random.nextInt(4))
          .submittedAt(secondsAgo(random.nextInt(600)));
      switch (random.nextInt(12)) {
        case 0 -> call.gpus(16);
        case 1 -> call.qos("turbo");
        case 2 -> call.gpus(0).gpuEighths(2);
        case 3 -> call.gpus(0);
        case 4 -> call.qos("batch");
        case 5 -> call.gpus(2);
        default -> { }
      }
      queue.add(call);
    }
    return aSnapshot().workers(workers.toArray(Builders.WorkerBuilder[]::new))
        .running(running.toArray(RunningCall.Builder[]::new))
        .queue(queue.toArray(QueuedCall.Builder[]::new));
  }

  private static void assertSameDecisions(Plan explained, Plan quiet, String what) {
    assertEquals(explained.placements(), quiet.placements(), what);
    assertEquals(explained.preemptions(), quiet.preemptions(), what);
    assertEquals(sorted(explained.infeasible()), sorted(quiet.infeasible()), what);
    assertEquals(explained.revisitAt(), quiet.revisitAt(), what);
    assertTrue(quiet.waiting().isEmpty(), what);
  }

  private static List<Rejection> sorted(List<Rejection> rejections) {
    return rejections.stream().sorted(Comparator.comparing(Rejection::callId)).toList();
  }

  private static List<String> rejected(Plan plan) {
    return plan.infeasible().stream().map(Rejection::callId).sorted(Comparator.naturalOrder())
        .toList();
  }
}
