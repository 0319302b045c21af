package dev.bulletin.runtime;

import java.time.Duration;

/**
 * How long the runtime waits for clients and workers whose link broke (docs/durability.md,
 * "Reconnecting clients and workers"). Immutable, validated on construction.
 *
 * @param sessionWindow how long a client session whose stream broke is kept (its calls run on,
 *     its events are kept) for its client to resume it; zero ends it at once, as before
 *     sessions could resume. At least the client's retry limit (120 s by default).
 * @param workerGrace how long the calls of a remote worker whose link broke stay assigned to it
 *     for it to reattach and report them, before they are requeued (or fail as WORKER_LOST)
 */
public record ReconnectOptions(Duration sessionWindow, Duration workerGrace) {
  public static final Duration DEFAULT_SESSION_WINDOW = Duration.ofSeconds(180);
  public static final Duration DEFAULT_WORKER_GRACE = Duration.ofSeconds(60);

  public ReconnectOptions {
    if (sessionWindow == null || sessionWindow.isNegative()) {
      throw new IllegalArgumentException("reconnect.sessionWindow (--reconnect-window) must be"
          + " a duration >= 0, got " + sessionWindow);
    }
    if (workerGrace == null || workerGrace.isNegative()) {
      throw new IllegalArgumentException("reconnect.workerGrace (--worker-grace) must be a"
          + " duration >= 0, got " + workerGrace);
    }
  }

  public static ReconnectOptions defaults() {
    return new ReconnectOptions(DEFAULT_SESSION_WINDOW, DEFAULT_WORKER_GRACE);
  }

  /** From seconds, as the command line gives them. */
  public static ReconnectOptions ofSeconds(double sessionWindow, double workerGrace) {
    return new ReconnectOptions(seconds(sessionWindow, "--reconnect-window"),
        seconds(workerGrace, "--worker-grace"));
  }

  private static Duration seconds(double value, String option) {
    if (!(value >= 0) || Double.isInfinite(value)) {
      throw new IllegalArgumentException(option + " must be seconds >= 0, got " + value);
    }
    return Duration.ofMillis(Math.round(value * 1000));
  }
}
