package dev.bulletin.runtime.usage.impl;

import dev.bulletin.runtime.usage.UsageRecord;
import dev.bulletin.runtime.usage.UsageStore;
import dev.bulletin.runtime.usage.UsageTotals;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Timestamp;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * The usage ledger in an embedded H2 database (one file, {@code usage.mv.db}; see
 * docs/usage.md for why H2). One thread owns the connection: it writes the queued records in one
 * transaction per batch (every second), answers queries, and deletes rows past the retention.
 */
public final class H2UsageStore implements UsageStore {
  private static final Logger LOG = Logger.getLogger(H2UsageStore.class.getName());
  private static final long FLUSH_MILLIS = 1000;
  private static final long RETENTION_CHECK_MILLIS = 3_600_000;

  private record Earned(String group, double credits, Instant at) {}

  private final Path file;
  private final Duration retention;
  /** Opened on the ledger's thread; null until then, or when it could not be opened. */
  private Connection connection;
  private String unavailable;
  private final ConcurrentLinkedQueue<UsageRecord> records = new ConcurrentLinkedQueue<>();
  private final ConcurrentLinkedQueue<Earned> earned = new ConcurrentLinkedQueue<>();
  private final ScheduledExecutorService thread = Executors.newSingleThreadScheduledExecutor(
      runnable -> {
        Thread t = new Thread(runnable, "bulletin-usage-ledger");
        t.setDaemon(true);
        return t;
      });

  private H2UsageStore(Path file, Duration retention) {
    this.file = file;
    this.retention = retention;
    // Opening reads the file: on the ledger's thread, never the caller's (an event loop).
    thread.execute(this::connect);
    thread.scheduleWithFixedDelay(this::write, FLUSH_MILLIS, FLUSH_MILLIS, TimeUnit.MILLISECONDS);
    if (!retention.isZero()) {
      thread.scheduleWithFixedDelay(this::expire, 0, RETENTION_CHECK_MILLIS,
          TimeUnit.MILLISECONDS);
    }
  }

  /**
   * @param file the database file without H2's ".mv.db" suffix
   * @param retention rows older than this are deleted; zero keeps everything
   */
  public static H2UsageStore open(Path file, Duration retention) {
    if (retention == null || retention.isNegative()) {
      throw new IllegalArgumentException("usage retention must be >= 0, got " + retention);
    }
    return new H2UsageStore(file, retention);
  }

  private void connect() {
    try {
      // The driver directly, not DriverManager: the shaded jar need not carry its service file.
      Connection opened = new org.h2.Driver().connect("jdbc:h2:file:"
          + file.toAbsolutePath() + ";DB_CLOSE_ON_EXIT=FALSE", new Properties());
      try (Statement create = opened.createStatement()) {
        create.execute("CREATE TABLE IF NOT EXISTS calls (task_id VARCHAR(200) NOT NULL,"
            + " name VARCHAR(400), user_name VARCHAR(200) NOT NULL,"
            + " group_name VARCHAR(200) NOT NULL, qos VARCHAR(100), worker VARCHAR(200),"
            + " gpus INT, submitted_at TIMESTAMP WITH TIME ZONE,"
            + " ended_at TIMESTAMP WITH TIME ZONE NOT NULL, queued_seconds DOUBLE PRECISION,"
            + " reserved_seconds DOUBLE PRECISION, running_seconds DOUBLE PRECISION,"
            + " gpu_seconds_reserved DOUBLE PRECISION, gpu_seconds_busy DOUBLE PRECISION,"
            + " credits_spent DOUBLE PRECISION, attempts INT, outcome VARCHAR(100),"
            + " gpu_share DOUBLE PRECISION, calls BIGINT)");
        // gpus counts the GPUs a call ran on (1 for a share of one); gpu_share what it asked
        // (0.5). A ledger written before fractional GPUs gets the column here.
        create.execute("ALTER TABLE calls ADD COLUMN IF NOT EXISTS gpu_share DOUBLE PRECISION");
        // The user's calls a row stands for: 1, or a lease's calls (issue 30). Rows written
        // before leases get the column here, empty: each is one call.
        create.execute("ALTER TABLE calls ADD COLUMN IF NOT EXISTS calls BIGINT");
        create.execute("CREATE INDEX IF NOT EXISTS calls_ended_at ON calls(ended_at)");
        create.execute("CREATE TABLE IF NOT EXISTS credits_earned ("
            + " group_name VARCHAR(200) NOT NULL, at TIMESTAMP WITH TIME ZONE NOT NULL,"
            + " credits DOUBLE PRECISION)");
        create.execute("CREATE INDEX IF NOT EXISTS credits_earned_at ON credits_earned(at)");
      }
      opened.setAutoCommit(false);
      connection = opened;
    } catch (SQLException e) {
      unavailable = "the usage ledger " + file + ".mv.db cannot be opened: " + e.getMessage();
      LOG.log(Level.SEVERE, unavailable + "; calls are not recorded", e);
    }
  }

  @Override
  public void append(UsageRecord record) {
    records.add(record);
  }

  @Override
  public void creditsEarned(String group, double credits, Instant at) {
    if (credits > 0) {
      earned.add(new Earned(group, credits, at));
    }
  }

  @Override
  public CompletableFuture<List<UsageTotals>> totals(Instant since, Instant until, By by,
      String onlyUser) {
    return CompletableFuture.supplyAsync(() -> {
      write(); // a report sees every call that ended before it was asked
      if (connection == null) {
        throw new IllegalStateException(unavailable);
      }
      try {
        return query(since, until, by, onlyUser);
      } catch (SQLException e) {
        throw new IllegalStateException("the usage ledger could not be read: " + e.getMessage(),
            e);
      }
    }, thread);
  }

  @Override
  public CompletableFuture<Void> flush() {
    return CompletableFuture.runAsync(this::write, thread);
  }

  @Override
  public void close() {
    try {
      flush().get(30, TimeUnit.SECONDS);
    } catch (Exception e) {
      LOG.log(Level.WARNING, "usage ledger: the last records could not be written", e);
    }
    thread.shutdownNow();
    try {
      if (connection != null) {
        connection.close();
      }
    } catch (SQLException e) {
      LOG.log(Level.WARNING, "usage ledger: close failed", e);
    }
  }

  /** Writes the queued records and credits in one transaction. On the ledger's thread. */
  private void write() {
    if (connection == null) {
      records.clear(); // the ledger could not be opened (logged): nothing to keep them for
      earned.clear();
      return;
    }
    if (records.isEmpty() && earned.isEmpty()) {
      return;
    }
    List<UsageRecord> batch = new ArrayList<>();
    for (UsageRecord r; (r = records.poll()) != null; ) {
      batch.add(r);
    }
    // Credits are earned every few seconds: one row per group per batch is enough.
    Map<String, Earned> byGroup = new HashMap<>();
    for (Earned e; (e = earned.poll()) != null; ) {
      byGroup.merge(e.group(), e, (a, b) -> new Earned(a.group(), a.credits() + b.credits(),
          b.at()));
    }
    try (PreparedStatement insert = connection.prepareStatement("INSERT INTO calls VALUES"
        + " (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
        PreparedStatement credits = connection.prepareStatement(
            "INSERT INTO credits_earned VALUES (?, ?, ?)")) {
      for (UsageRecord r : batch) {
        insert.setString(1, r.taskId());
        insert.setString(2, cut(r.name(), 400));
        insert.setString(3, r.user());
        insert.setString(4, r.group());
        insert.setString(5, r.qos());
        insert.setString(6, r.worker());
        insert.setInt(7, (int) Math.ceil(r.gpus()));
        insert.setTimestamp(8, Timestamp.from(r.submittedAt()));
        insert.setTimestamp(9, Timestamp.from(r.endedAt()));
        insert.setDouble(10, r.queuedSeconds());
        insert.setDouble(11, r.reservedSeconds());
        insert.setDouble(12, r.runningSeconds());
        insert.setDouble(13, r.gpuSecondsReserved());
        insert.setDouble(14, r.gpuSecondsBusy());
        insert.setDouble(15, r.creditsSpent());
        insert.setInt(16, r.attempts());
        insert.setString(17, r.outcome());
        insert.setDouble(18, r.gpus());
        insert.setLong(19, r.calls());
        insert.addBatch();
      }
      for (Earned e : byGroup.values()) {
        credits.setString(1, e.group());
        credits.setTimestamp(2, Timestamp.from(e.at()));
        credits.setDouble(3, e.credits());
        credits.addBatch();
      }
      insert.executeBatch();
      credits.executeBatch();
      connection.commit();
    } catch (SQLException e) {
      // Lost rows are logged, not retried forever: a broken disk must not grow the queue.
      LOG.log(Level.WARNING, "usage ledger: " + batch.size() + " records could not be written",
          e);
      try {
        connection.rollback();
      } catch (SQLException ignored) {
        // The next batch tries again with a fresh transaction.
      }
    }
  }

  private static String cut(String text, int max) {
    return text == null || text.length() <= max ? text : text.substring(0, max);
  }

  private List<UsageTotals> query(Instant since, Instant until, By by, String onlyUser)
      throws SQLException {
    boolean byUser = by == By.USER;
    String keys = byUser ? "user_name, group_name" : "group_name";
    String sql = "SELECT " + keys + ", SUM(COALESCE(calls, 1)), SUM(gpu_seconds_reserved),"
        + " SUM(gpu_seconds_busy), SUM(credits_spent), SUM(queued_seconds),"
        + " SUM(running_seconds) FROM calls WHERE ended_at >= ? AND ended_at < ?"
        + (onlyUser != null ? " AND user_name = ?" : "") + " GROUP BY " + keys
        + " ORDER BY SUM(gpu_seconds_reserved) DESC, " + keys;
    Map<String, Double> earnedByGroup = byUser ? Map.of() : earned(since, until);
    List<UsageTotals> rows = new ArrayList<>();
    try (PreparedStatement select = connection.prepareStatement(sql)) {
      select.setTimestamp(1, Timestamp.from(since));
      select.setTimestamp(2, Timestamp.from(until));
      if (onlyUser != null) {
        select.setString(3, onlyUser);
      }
      try (ResultSet r = select.executeQuery()) {
        while (r.next()) {
          int at = byUser ? 2 : 1;
          String user = byUser ? r.getString(1) : "";
          String group = r.getString(at);
          rows.add(new UsageTotals(user, group, r.getLong(at + 1), r.getDouble(at + 2),
              r.getDouble(at + 3), r.getDouble(at + 4), earnedByGroup.getOrDefault(group, 0.0),
              r.getDouble(at + 5), r.getDouble(at + 6)));
        }
      }
    }
    connection.commit();
    return rows;
  }

  private Map<String, Double> earned(Instant since, Instant until) throws SQLException {
    Map<String, Double> earned = new HashMap<>();
    try (PreparedStatement select = connection.prepareStatement("SELECT group_name,"
        + " SUM(credits) FROM credits_earned WHERE at >= ? AND at < ? GROUP BY group_name")) {
      select.setTimestamp(1, Timestamp.from(since));
      select.setTimestamp(2, Timestamp.from(until));
      try (ResultSet r = select.executeQuery()) {
        while (r.next()) {
          earned.put(r.getString(1), r.getDouble(2));
        }
      }
    }
    return earned;
  }

  /** Deletes rows older than the retention. On the ledger's thread. */
  private void expire() {
    if (connection == null) {
      return;
    }
    Timestamp before = Timestamp.from(Instant.now().minus(retention));
    try (PreparedStatement calls = connection.prepareStatement(
            "DELETE FROM calls WHERE ended_at < ?");
        PreparedStatement credits = connection.prepareStatement(
            "DELETE FROM credits_earned WHERE at < ?")) {
      calls.setTimestamp(1, before);
      credits.setTimestamp(1, before);
      int deleted = calls.executeUpdate() + credits.executeUpdate();
      connection.commit();
      if (deleted > 0) {
        LOG.info("usage ledger: deleted " + deleted + " rows older than " + retention);
      }
    } catch (SQLException e) {
      LOG.log(Level.WARNING, "usage ledger: expiring old rows failed", e);
    }
  }
}
