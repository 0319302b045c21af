package dev.bulletin.bridge;

/** The store cannot make room for an object; the message names the sizes involved. */
public class StoreFullException extends ObjectStoreException {
  public StoreFullException(String message) {
    super(message);
  }

  public StoreFullException(String message, Throwable cause) {
    super(message, cause);
  }
}
