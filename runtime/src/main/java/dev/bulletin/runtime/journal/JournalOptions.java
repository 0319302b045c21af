package dev.bulletin.runtime.journal;

import dev.bulletin.runtime.journal.impl.FrameSink;
import java.nio.file.Path;
import java.util.Objects;

/**
 * Where the journal lives and when it is compacted.
 *
 * @param folder the journal's folder (created, owner-only)
 * @param compactBytes a log this large is folded into a snapshot and a new log begun
 * @param sinks how log files are opened for writing: files, or (tests) a sink that fails like a
 *     full disk
 */
public record JournalOptions(Path folder, long compactBytes, FrameSink.Opener sinks) {

  /** Logs are compacted past 64 MiB: a restart then reads a snapshot and at most that. */
  public static final long DEFAULT_COMPACT_BYTES = 64L << 20;

  public JournalOptions {
    Objects.requireNonNull(folder, "folder");
    Objects.requireNonNull(sinks, "sinks");
    if (compactBytes < 1) {
      throw new IllegalArgumentException("compactBytes must be >= 1, got " + compactBytes);
    }
  }

  public static JournalOptions in(Path folder) {
    return new JournalOptions(folder, DEFAULT_COMPACT_BYTES, FrameSink.FILES);
  }

  public JournalOptions withCompactBytes(long bytes) {
    return new JournalOptions(folder, bytes, sinks);
  }

  public JournalOptions withSinks(FrameSink.Opener opener) {
    return new JournalOptions(folder, compactBytes, opener);
  }
}
