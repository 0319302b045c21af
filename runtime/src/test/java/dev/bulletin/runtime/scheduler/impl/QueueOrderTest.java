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
}
