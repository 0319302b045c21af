package dev.bulletin.runtime.journal;

import dev.bulletin.runtime.journal.impl.KryoJournal;

/** Opens a journal: reads what its folder holds, then appends after it. */
public final class Journals {
  private Journals() { }

  /**
   * A journal opened on its folder, and the state its files add up to.
   *
   * @param droppedBytes bytes of a torn tail that were dropped (a crash mid-write)
   */
  public record Opened(StateJournal journal, JournalState restored, long records,
      long droppedBytes) { }

  /** @throws JournalException if the folder is in use, or holds a journal this cannot read */
  public static Opened open(JournalOptions options) {
    return KryoJournal.open(options);
  }
}
