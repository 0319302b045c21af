package dev.bulletin.runtime.control;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.runtime.journal.JournalRecord;
import dev.bulletin.runtime.scheduler.policy.PolicyConfig;
import dev.bulletin.runtime.scheduler.policy.PolicyYaml;
import dev.bulletin.runtime.scheduler.snapshot.Usage;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The usage ledger as the journal keeps it: every change is told, and an image restores it. */
class UsageLedgerJournalTest {

  private static final PolicyConfig POLICY = PolicyYaml.parse("""
      groups:
        nlp: {gpus: 8, gpu_hours: 500, period: 7d}
        vision: {gpus: 4}
      scheduler:
        credits: {per_idle_gpu_hour: 0.5, max_balance: 100}
      """);

  @Test
  void aRestoredLedgerHasTheSameUsageCreditsAndPeriods() {
    Instant t0 = Instant.parse("2026-11-23T10:00:00Z");
    UsageLedger ledger = new UsageLedger(POLICY);
    List<JournalRecord.Ledger> images = new ArrayList<>();
    ledger.onChange(() -> images.add(ledger.image()));
    ledger.earn(Map.of(), Duration.ofHours(3), t0);
    ledger.charge("ada", "nlp", 2, 1800, t0.plusSeconds(60));
    ledger.charge("bob", "vision", 1, 600, t0.plusSeconds(120));
    ledger.spend("nlp", 0.25, t0.plusSeconds(180));
    assertEquals(4, images.size(), "every change is told");

    UsageLedger restored = new UsageLedger(POLICY);
    restored.restore(images.get(images.size() - 1));
    Instant later = t0.plusSeconds(3600);
    Usage before = ledger.snapshot(later);
    Usage after = restored.snapshot(later);
    assertEquals(before.groups(), after.groups());
    assertEquals(before.users(), after.users());
    assertTrue(after.groups().get("nlp").gpuHoursThisPeriod() > 0.99, after.toString());
    assertTrue(after.groups().get("nlp").credits() > 0, after.toString());
  }
}
