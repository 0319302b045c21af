package dev.bulletin.runtime.pool;

/** A provider could not do what was asked; the message carries the provider's own words. */
public final class ProviderException extends RuntimeException {
  public ProviderException(String message) {
    super(message);
  }

  public ProviderException(String message, Throwable cause) {
    super(message, cause);
  }
}
