package dev.bulletin.runtime.scheduler.impl;

import static dev.bulletin.runtime.scheduler.Builders.secondsAgo;
import static dev.bulletin.runtime.scheduler.Builders.CLOCK;
import static dev.bulletin.runtime.scheduler.Builders.aCall;
import static dev.bulletin.runtime.scheduler.Builders.aRunningCall;
import static dev.bulletin.runtime.scheduler.Builders.aSnapshot;
import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.bulletin.runtime.scheduler.Builders;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/** The queue order alone: QoS priority, credits, fair share (group, then user), submit time. */
class QueueOrderTest {

  static Stream<Arguments> cases() {
    return Stream.of(
        Arguments.of("qos priority first", aSnapshot().queue(
            aCall().id("scav").qos("scavenger").submittedAt(secondsAgo(300)),
            aCall().id("batch").qos("batch").submittedAt(secondsAgo(200)),
            aCall().id("inter").qos("interactive").submittedAt(secondsAgo(1))),
            List.of("inter", "batch", "scav")),
        Arguments.of("credits before fair share and age", aSnapshot()
            .groupUsage("nlp", 0, 0, 100)
            .queue(aCall().id("old").user("bea").submittedAt(secondsAgo(300)),
                aCall().id("paid-1").user("ann").creditsSpent(1).submittedAt(secondsAgo(2)),
                aCall().id("paid-9").user("ann").creditsSpent(9).submittedAt(secondsAgo(1))),
            List.of("paid-9", "paid-1", "old")),
        Arguments.of("credits the group cannot cover are not honoured", aSnapshot()
            .groupUsage("nlp", 0, 0, 5)
            .queue(aCall().id("old").user("bea").submittedAt(secondsAgo(300)),
                aCall().id("too-rich").user("ann").creditsSpent(9).submittedAt(secondsAgo(1))),
            List.of("old", "too-rich")),
        Arguments.of("fair share between groups: less recent usage first", aSnapshot()
            .groupUsage("nlp", 50_000, 0, 0).groupUsage("vision", 10, 0, 0)
            .queue(aCall().id("nlp").group("nlp").submittedAt(secondsAgo(300)),
                aCall().id("vision").user("vic").group("vision").submittedAt(secondsAgo(1))),
            List.of("vision", "nlp")),
        Arguments.of("fair share inside a group: the lighter user first", aSnapshot()
            .userUsage("ann", 9_000)
            .queue(aCall().id("ann").user("ann").submittedAt(secondsAgo(300)),
                aCall().id("bea").user("bea").submittedAt(secondsAgo(1))),
            List.of("bea", "ann")),
        Arguments.of("GPUs held now count as usage", aSnapshot()
            .running(aRunningCall().user("ann").group("nlp").on("w", 0))
            .queue(aCall().id("ann").user("ann").submittedAt(secondsAgo(300)),
                aCall().id("bea").user("bea").submittedAt(secondsAgo(1))),
            List.of("bea", "ann")),
        Arguments.of("submit time breaks ties", aSnapshot()
            .queue(aCall().id("second").user("bea").submittedAt(secondsAgo(10)),
                aCall().id("first").user("ann").submittedAt(secondsAgo(20))),
            List.of("first", "second")),
        Arguments.of("a user's own priority orders only their calls", aSnapshot()
            .queue(aCall().id("ann-low").user("ann").submittedAt(secondsAgo(30)),
                aCall().id("ann-high").user("ann").priority(5).submittedAt(secondsAgo(10)),
                aCall().id("bea").user("bea").submittedAt(secondsAgo(20))),
            List.of("ann-high", "bea", "ann-low")));
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("cases")
  void order(String name, Builders.SnapshotBuilder snapshot, List<String> expected) {
    Pass pass = new PolicyScheduler(CLOCK, 1, () -> 0L).pass(snapshot.build());
    QueueOrder order = new QueueOrder(pass.rows(), pass.userCount(), pass.counters());
    List<String> ids = new ArrayList<>();
    for (CallRow row = order.next(); row != null; row = order.next()) {
      ids.add(row.id());
    }
    assertEquals(expected, ids);
  }

  @org.junit.jupiter.api.Test
  void placingACallMovesItsUserBehindOthersInTheSamePass() {
    Pass pass = new PolicyScheduler(CLOCK, 1, () -> 0L).pass(aSnapshot().queue(
        aCall().id("a1").user("ann").submittedAt(secondsAgo(40)),
        aCall().id("a2").user("ann").submittedAt(secondsAgo(39)),
        aCall().id("b1").user("bea").submittedAt(secondsAgo(10))).build());
    QueueOrder order = new QueueOrder(pass.rows(), pass.userCount(), pass.counters());
    CallRow first = order.next();
    assertEquals("a1", first.id());
    pass.counters().add(first.user, first.group, first.qosId, 1, false);
    assertEquals("b1", order.next().id());
    assertEquals("a2", order.next().id());
  }

  /**
   * Many users in a few groups, with usage, QoS classes, credits and priorities drawn at random,
   * and placements charged as the order hands calls out: the order is the one a plain search
   * over every user's next call gives (the heaps are only a faster way to find it).
   */
  @ParameterizedTest(name = "seed {0}")
  @org.junit.jupiter.params.provider.ValueSource(longs = {1, 2, 3, 4, 5, 6, 7, 8})
  void theHeapsGiveTheOrderOfAPlainSearch(long seed) {
    java.util.Random random = new java.util.Random(seed);
    String[] qos = {"interactive", "batch", "scavenger"};
    Builders.SnapshotBuilder snapshot = aSnapshot();
    for (int g = 0; g < 4; g++) {
      snapshot.groupUsage("g" + g, random.nextInt(3) * 1000, 0, random.nextInt(3) * 5);
    }
    for (int u = 0; u < 40; u++) {
      snapshot.userUsage("u" + u, random.nextInt(4) * 500);
    }
    for (int i = 0; i < 400; i++) {
      int user = random.nextInt(40);
      snapshot.queue(aCall().id("q" + i).user("u" + user).group("g" + user % 4)
          .qos(qos[random.nextInt(3)]).priority(random.nextInt(10) < 2 ? 3 : 0)
          .creditsSpent(random.nextInt(20) == 0 ? 2 : 0)
          .submittedAt(secondsAgo(random.nextInt(100))));
    }
    Pass heaps = new PolicyScheduler(CLOCK, 1, () -> 0L).pass(snapshot.build());
    Pass plain = new PolicyScheduler(CLOCK, 1, () -> 0L).pass(snapshot.build());
    QueueOrder order = new QueueOrder(heaps.rows(), heaps.userCount(), heaps.counters());
    PlainOrder expected = new PlainOrder(plain.rows(), plain.userCount(), plain.counters());
    java.util.Random placing = new java.util.Random(seed);
    for (int i = 0; i <= 400; i++) {
      CallRow row = order.next();
      CallRow want = expected.next();
      assertEquals(want == null ? null : want.id(), row == null ? null : row.id(), "call " + i);
      if (row != null && placing.nextBoolean()) {
        heaps.counters().add(row.user, row.group, row.qosId, 1, false);
        plain.counters().add(want.user, want.group, want.qosId, 1, false);
      }
    }
  }

  /** The order by its definition: every user's next call compared, the least handed out. */
  private static final class PlainOrder {
    private final Counters counters;
    private final CallRow[][] runs;
    private final long[][] slots;
    private final int[] next;

    PlainOrder(CallRow[] rows, int users, Counters counters) {
      this.counters = counters;
      runs = new CallRow[users][];
      slots = new long[users][];
      next = new int[users];
      for (int u = 0; u < users; u++) {
        int user = u;
        runs[u] = java.util.Arrays.stream(rows).filter(row -> row.user == user)
            .sorted(QueueOrder.WITHIN_USER).toArray(CallRow[]::new);
        slots[u] = QueueOrder.slots(runs[u]);
      }
    }

    CallRow next() {
      int best = -1;
      for (int u = 0; u < runs.length; u++) {
        if (next[u] < runs[u].length && (best < 0 || before(u, best))) {
          best = u;
        }
      }
      return best < 0 ? null : runs[best][next[best]++];
    }

    private boolean before(int a, int b) {
      CallRow x = runs[a][next[a]];
      CallRow y = runs[b][next[b]];
      java.util.Comparator<Integer> order = java.util.Comparator
          .comparingInt((Integer u) -> -runs[u][next[u]].qosPriority())
          .thenComparingDouble(u -> -runs[u][next[u]].boost)
          .thenComparingDouble(u -> counters.groupCharge(runs[u][next[u]].group))
          .thenComparingDouble(counters::userCharge)
          .thenComparingLong(u -> slots[u][next[u]])
          .thenComparingInt(u -> runs[u][next[u]].index);
      return x != y && order.compare(a, b) < 0;
    }
  }
}
