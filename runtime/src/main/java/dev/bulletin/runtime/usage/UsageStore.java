package dev.bulletin.runtime.usage;

import dev.bulletin.runtime.usage.impl.H2UsageStore;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * The persisted usage ledger: one row per ended call, and the credits groups earned. Writes are
 * queued and written in batches off the caller's thread; queries run off it too.
 */
public interface UsageStore extends AutoCloseable {

  /** The ledger's file under the runtime's state folder (H2 adds ".mv.db"). */
  String FILE_NAME = "usage";

  /** How a report groups its rows. */
  enum By { USER, GROUP }

  /** Queues a record; never blocks. */
  void append(UsageRecord record);

  /** Queues credits a group earned; never blocks. */
  void creditsEarned(String group, double credits, Instant at);

  /**
   * Totals of the calls that ended in [since, until), by user or group.
   *
   * @param onlyUser when not null, that user's calls only
   */
  CompletableFuture<List<UsageTotals>> totals(Instant since, Instant until, By by,
      String onlyUser);

  /** Writes what is queued and waits for it (tests, shutdown). */
  CompletableFuture<Void> flush();

  /** Writes what is queued and closes the file. */
  @Override
  void close();

  /**
   * Opens (creating) the ledger in {@code folder}.
   *
   * @param retention rows older than this are deleted (checked hourly); zero keeps everything
   */
  static UsageStore open(Path folder, Duration retention) {
    return H2UsageStore.open(folder.resolve(FILE_NAME), retention);
  }
}
