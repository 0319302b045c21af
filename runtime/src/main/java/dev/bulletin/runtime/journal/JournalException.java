package dev.bulletin.runtime.journal;

/**
 * The journal cannot be opened: another runtime uses the folder, a file is of a format this
 * version does not read, or a file is damaged beyond a torn tail. The message says what to do.
 */
public final class JournalException extends RuntimeException {
  public JournalException(String message) {
    super(message);
  }

  public JournalException(String message, Throwable cause) {
    super(message, cause);
  }
}
