package dev.bulletin.bridge;

/** A store operation failed; the message says which object and why. */
public class ObjectStoreException extends RuntimeException {
  public ObjectStoreException(String message) {
    super(message);
  }

  public ObjectStoreException(String message, Throwable cause) {
    super(message, cause);
  }
}
