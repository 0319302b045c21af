package dev.bulletin.runtime.control;

import dev.bulletin.runtime.journal.JournalRecord;
import java.util.ArrayList;
import java.util.List;

import dev.bulletin.runtime.scheduler.policy.GroupQuota;
import dev.bulletin.runtime.scheduler.policy.PolicyConfig;
import dev.bulletin.runtime.scheduler.snapshot.Usage;
import java.time.Duration;
import java.time.Instant;
import java.util.HashMap;
import java.util.Map;

/**
 * What groups and users have used, for fair share, GPU-hour quotas and credits. Recent use decays
 * with the policy's fair-share horizon as half-life; GPU-hours count per quota period; credits
 * follow the policy's {@code CreditRule}. Every change is told to a listener: the journal keeps
 * the ledger's image ({@link #image}), and a restart restores it ({@link #restore}).
 * Owned by the control plane's event loop.
 */
final class UsageLedger {

  private static final class Decayed {
    double value;
    Instant at;
  }

  private static final class GroupBook {
    final Decayed recent = new Decayed();
    double gpuHours;
    Instant periodEnds;
    double credits;
  }

  private final PolicyConfig policy;
  private final Map<String, GroupBook> groups = new HashMap<>();
  private final Map<String, Decayed> users = new HashMap<>();

  private Runnable changed = () -> { };

  UsageLedger(PolicyConfig policy) {
    this.policy = policy;
  }

  /** Runs after every change (the journal writes the new image). */
  void onChange(Runnable listener) {
    this.changed = listener;
  }

  /** Everything the ledger holds, as the journal keeps it. */
  JournalRecord.Ledger image() {
    List<JournalRecord.GroupUsage> groupRows = new ArrayList<>();
    groups.forEach((name, book) -> groupRows.add(new JournalRecord.GroupUsage(name,
        book.recent.value, millis(book.recent.at), book.gpuHours, millis(book.periodEnds),
        book.credits)));
    List<JournalRecord.UserUsage> userRows = new ArrayList<>();
    users.forEach((name, recent) -> userRows.add(new JournalRecord.UserUsage(name, recent.value,
        millis(recent.at))));
    return new JournalRecord.Ledger(groupRows.toArray(JournalRecord.GroupUsage[]::new),
        userRows.toArray(JournalRecord.UserUsage[]::new));
  }

  /** Takes the books a journal kept (on a restart, before any call is charged). */
  void restore(JournalRecord.Ledger image) {
    for (JournalRecord.GroupUsage row : image.groups()) {
      GroupBook book = groups.computeIfAbsent(row.group(), g -> new GroupBook());
      book.recent.value = row.recent();
      book.recent.at = instant(row.recentAtMillis());
      book.gpuHours = row.gpuHours();
      book.periodEnds = row.periodEndsMillis() == Long.MAX_VALUE ? Instant.MAX
          : instant(row.periodEndsMillis());
      book.credits = row.credits();
    }
    for (JournalRecord.UserUsage row : image.users()) {
      Decayed recent = users.computeIfAbsent(row.user(), u -> new Decayed());
      recent.value = row.recent();
      recent.at = instant(row.recentAtMillis());
    }
  }

  /** Epoch millis; Long.MIN_VALUE for "never", Long.MAX_VALUE for Instant.MAX (no period). */
  private static long millis(Instant at) {
    if (at == null) {
      return Long.MIN_VALUE;
    }
    return at.equals(Instant.MAX) ? Long.MAX_VALUE : at.toEpochMilli();
  }

  private static Instant instant(long millis) {
    return millis == Long.MIN_VALUE ? null : Instant.ofEpochMilli(millis);
  }

  /**
   * A call held {@code gpus} GPUs for {@code seconds}, ending at {@code now}; a share of a GPU
   * is charged as its fraction (0.5 GPU for an hour: 0.5 GPU-hours).
   */
  void charge(String user, String group, double gpus, double seconds, Instant now) {
    double gpuSeconds = gpus * Math.max(0, seconds);
    if (gpuSeconds == 0) {
      return;
    }
    GroupBook book = book(group, now);
    add(book.recent, gpuSeconds, now);
    book.gpuHours += gpuSeconds / 3600;
    add(users.computeIfAbsent(user, u -> new Decayed()), gpuSeconds, now);
    changed.run();
  }

  /** A placement paid credits for its place in the queue. */
  void spend(String group, double credits, Instant now) {
    GroupBook book = book(group, now);
    book.credits = Math.max(0, book.credits - credits);
    changed.run();
  }

  /**
   * Groups under their quota earn credits for the GPUs they did not hold over {@code elapsed}.
   *
   * @return the credits each group earned now (groups that earned none are left out)
   */
  Map<String, Double> earn(Map<String, Double> gpusHeldByGroup, Duration elapsed, Instant now) {
    Map<String, Double> earned = new HashMap<>();
    for (GroupQuota quota : policy.groups().values()) {
      GroupBook book = book(quota.name(), now);
      double before = book.credits;
      book.credits = policy.credits().earn(quota, book.credits,
          gpusHeldByGroup.getOrDefault(quota.name(), 0.0), elapsed);
      if (book.credits > before) {
        earned.put(quota.name(), book.credits - before);
      }
    }
    if (!policy.groups().isEmpty()) {
      changed.run();
    }
    return earned;
  }

  Usage snapshot(Instant now) {
    Map<String, Usage.GroupUsage> groupUsage = new HashMap<>();
    groups.forEach((name, book) -> {
      book(name, now);
      groupUsage.put(name, new Usage.GroupUsage(decayed(book.recent, now), book.gpuHours,
          book.credits, book.periodEnds));
    });
    Map<String, Double> userUsage = new HashMap<>();
    users.forEach((name, recent) -> userUsage.put(name, decayed(recent, now)));
    return new Usage(groupUsage, userUsage);
  }

  private GroupBook book(String group, Instant now) {
    GroupBook book = groups.computeIfAbsent(group, g -> new GroupBook());
    Duration period = policy.group(group).period();
    if (period == null || period.isZero()) {
      book.periodEnds = Instant.MAX;
    } else if (book.periodEnds == null || !now.isBefore(book.periodEnds)) {
      book.periodEnds = now.plus(period); // a new quota period starts with a clean count
      book.gpuHours = 0;
    }
    return book;
  }

  private void add(Decayed decayed, double amount, Instant now) {
    decayed.value = decayed(decayed, now) + amount;
    decayed.at = now;
  }

  private double decayed(Decayed decayed, Instant now) {
    if (decayed.at == null) {
      return 0;
    }
    double halfLife = Math.max(1, policy.fairShareHorizon().toSeconds());
    double age = Math.max(0, Duration.between(decayed.at, now).toMillis() / 1000.0);
    return decayed.value * Math.pow(0.5, age / halfLife);
  }
}
