package dev.bulletin.runtime;

import java.io.IOException;
import java.net.BindException;

/**
 * A port the runtime was asked to listen on is held by another process: said with the port,
 * the address and what to do, instead of a bare {@link BindException}.
 */
public final class PortInUseException extends IOException {

  private PortInUseException(String host, int port, String option, Throwable cause) {
    super("port " + port + " on " + host + " is in use (another bulletin runtime? `bulletin"
        + " down`, or " + option + ")", cause);
  }

  /**
   * What to report for a failure to listen on host:port: a PortInUseException when the port is
   * taken, else the error itself.
   *
   * @param option the command-line option that chooses the port, e.g. "--port"
   */
  public static Throwable explain(Throwable error, String host, int port, String option) {
    for (Throwable cause = error; cause != null; cause = cause.getCause()) {
      // NIO throws BindException; a native transport an IOException with the errno's text.
      if (cause instanceof BindException || String.valueOf(cause.getMessage())
          .contains("Address already in use")) {
        return new PortInUseException(host, port, option, error);
      }
    }
    return error;
  }
}
