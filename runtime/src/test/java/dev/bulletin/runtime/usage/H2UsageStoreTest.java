package dev.bulletin.runtime.usage;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.Properties;
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
  void aLeaseCountsTheCallsItRanAndRowsWrittenBeforeLeasesCountOnce(@TempDir Path home)
      throws Exception {
    Instant now = Instant.now();
    // A ledger as a runtime before leases wrote it: no calls column.
    try (Connection old = new org.h2.Driver().connect("jdbc:h2:file:"
        + home.resolve(UsageStore.FILE_NAME).toAbsolutePath(), new Properties());
        Statement create = old.createStatement()) {
      create.execute("CREATE TABLE calls (task_id VARCHAR(200) NOT NULL, name VARCHAR(400),"
          + " user_name VARCHAR(200) NOT NULL, group_name VARCHAR(200) NOT NULL,"
          + " qos VARCHAR(100), worker VARCHAR(200), gpus INT,"
          + " submitted_at TIMESTAMP WITH TIME ZONE, ended_at TIMESTAMP WITH TIME ZONE NOT NULL,"
          + " queued_seconds DOUBLE PRECISION, reserved_seconds DOUBLE PRECISION,"
          + " running_seconds DOUBLE PRECISION, gpu_seconds_reserved DOUBLE PRECISION,"
          + " gpu_seconds_busy DOUBLE PRECISION, credits_spent DOUBLE PRECISION, attempts INT,"
          + " outcome VARCHAR(100), gpu_share DOUBLE PRECISION)");
      create.execute("INSERT INTO calls VALUES ('before', 'train', 'alice', 'vision', 'batch',"
          + " 'w0', 1, NULL, TIMESTAMP WITH TIME ZONE '" + now.minusSeconds(30) + "', 0, 1, 1,"
          + " 1, 0, 0, 1, 'finished', 1)");
    }
    try (UsageStore store = UsageStore.open(home, Duration.ZERO)) {
      store.append(call("one", "alice", "vision", now.minusSeconds(20), 1, 1, 0));
      store.append(new UsageRecord("lease", "bulletin-lease", "alice", "vision", "batch", "w0",
          1, now.minusSeconds(12), now.minusSeconds(10), 0, 2, 2, 2, 1, 0, 1, "finished", 250));
      store.append(new UsageRecord("withdrawn", "bulletin-lease", "alice", "vision", "batch",
          "", 1, now.minusSeconds(12), now.minusSeconds(10), 1, 0, 0, 0, 0, 0, 0, "cancelled",
          0));
    }
    try (UsageStore store = UsageStore.open(home, Duration.ZERO)) {
      UsageTotals alice = store.totals(Instant.EPOCH, now.plusSeconds(1), UsageStore.By.USER,
          "alice").get().get(0);
      assertEquals(1 + 1 + 250, alice.calls());
      assertEquals(1 + 1 + 2, alice.gpuSecondsReserved(), 1e-9); // the lease's time, as any call's
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
