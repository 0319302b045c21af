package dev.bulletin.runtime.usage;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class H2UsageStoreTest {

  private static UsageRecord call(String id, String user, String group, Instant ended,
      double reserved, double busy, double credits) {
    return new UsageRecord(id, "train", user, group, "batch", "w0", 2, ended.minusSeconds(60),
        ended, 1, reserved / 2, reserved / 2, reserved, busy, credits, 1, "finished");
  }

  @Test
  void totalsByUserAndGroupOverAPeriodSurviveAReopen(@TempDir Path home) throws Exception {
    Instant now = Instant.now();
    try (UsageStore store = UsageStore.open(home, Duration.ZERO)) {
      store.append(call("a1", "alice", "vision", now.minusSeconds(10), 100, 80, 0));
      store.append(call("a2", "alice", "vision", now.minusSeconds(20), 50, 10, 2));
      store.append(call("b1", "bob", "nlp", now.minusSeconds(30), 40, 0, 0));
      store.append(call("old", "alice", "vision", now.minus(Duration.ofDays(9)), 999, 999, 0));
      store.creditsEarned("vision", 3, now.minusSeconds(5));
      store.creditsEarned("vision", 1.5, now.minusSeconds(4));
    }
    try (UsageStore store = UsageStore.open(home, Duration.ZERO)) {
      Instant weekAgo = now.minus(Duration.ofDays(7));
      Instant later = now.plusSeconds(1);
      Map<String, UsageTotals> users = byKey(store.totals(weekAgo, later, UsageStore.By.USER,
          null).get(), UsageTotals::user);
      assertEquals(2, users.get("alice").calls());
      assertEquals(150, users.get("alice").gpuSecondsReserved(), 1e-9);
      assertEquals(90, users.get("alice").gpuSecondsBusy(), 1e-9);
      assertEquals(2, users.get("alice").creditsSpent(), 1e-9);
      assertEquals(1, users.get("bob").calls());

      List<UsageTotals> onlyBob = store.totals(weekAgo, later, UsageStore.By.USER, "bob").get();
      assertEquals(List.of("bob"), onlyBob.stream().map(UsageTotals::user).toList());

      Map<String, UsageTotals> groups = byKey(store.totals(weekAgo, later, UsageStore.By.GROUP,
          null).get(), UsageTotals::group);
      assertEquals(4.5, groups.get("vision").creditsEarned(), 1e-9);
      assertEquals("", groups.get("vision").user());
      assertEquals(0, groups.get("nlp").creditsEarned(), 1e-9);

      assertEquals(3, store.totals(Instant.EPOCH, later, UsageStore.By.USER, "alice").get()
          .get(0).calls(), "the nine-day-old call counts in a longer period");
    }
  }

  @Test
  void retentionDeletesRowsOlderThanIt(@TempDir Path home) throws Exception {
    Instant now = Instant.now();
    try (UsageStore store = UsageStore.open(home, Duration.ZERO)) {
      store.append(call("new", "alice", "vision", now.minusSeconds(10), 1, 1, 0));
      store.append(call("old", "alice", "vision", now.minus(Duration.ofDays(40)), 1, 1, 0));
    }
    try (UsageStore store = UsageStore.open(home, Duration.ofDays(30))) {
      List<UsageTotals> rows = store.totals(Instant.EPOCH, now.plusSeconds(1),
          UsageStore.By.USER, null).get();
      assertEquals(1, rows.get(0).calls());
    }
  }

  private static Map<String, UsageTotals> byKey(List<UsageTotals> rows,
      java.util.function.Function<UsageTotals, String> key) {
    assertTrue(!rows.isEmpty());
    return rows.stream().collect(Collectors.toMap(key, row -> row));
  }
}
