package dev.bulletin.runtime.journal;

/** Records could not be written (a full disk, an I/O error): the message names the folder. */
public final class JournalWriteException extends RuntimeException {
  public JournalWriteException(String message, Throwable cause) {
    super(message, cause);
  }
}
