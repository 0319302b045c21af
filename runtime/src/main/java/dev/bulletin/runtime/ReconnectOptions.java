package dev.bulletin.runtime;

import java.time.Duration;

/**
 * How long the runtime waits for clients and workers whose link broke (docs/durability.md,
 * "Reconnecting clients and workers"). Immutable, validated on construction.
 *
 * @param sessionWindow how long a client session whose stream broke is kept (its calls run on,
 *     its events are kept) for its client to resume it; zero ends it at once, as before
 *     sessions could resume. At least the client's retry limit (120 s by default).
 * @param workerGrace after a restart, how long the calls the journal had on a remote worker wait
 *     for that worker to find the new runtime and reattach, before they are requeued (or fail as
 *     WORKER_LOST): long, since the worker first has to notice the old runtime is gone
 * @param linkLossGrace while the runtime is up, how long the calls of a remote worker whose link
 *     broke (closed without a goodbye, or silent past the heartbeat limit) stay assigned to it
 *     for it to reattach, before they are requeued (or fail as WORKER_LOST): short, since a
 *     closed link is most often a dead worker, and a live one redials within a second or two
 */
public record ReconnectOptions(Duration sessionWindow, Duration workerGrace,
    Duration linkLossGrace) {
  public static final Duration DEFAULT_SESSION_WINDOW = Duration.ofSeconds(180);
  public static final Duration DEFAULT_WORKER_GRACE = Duration.ofSeconds(60);
  public static final Duration DEFAULT_LINK_LOSS_GRACE = Duration.ofSeconds(5);

  public ReconnectOptions {
    if (sessionWindow == null || sessionWindow.isNegative()) {
      throw new IllegalArgumentException("reconnect.sessionWindow (--reconnect-window) must be"
          + " a duration >= 0, got " + sessionWindow);
    }
    if (workerGrace == null || workerGrace.isNegative()) {
      throw new IllegalArgumentException("reconnect.workerGrace (--worker-grace) must be a"
          + " duration >= 0, got " + workerGrace);
    }
    if (linkLossGrace == null || linkLossGrace.isNegative()) {
      throw new IllegalArgumentException("reconnect.linkLossGrace (--link-loss-grace) must be a"
          + " duration >= 0, got " + linkLossGrace);
    }
  }

  public static ReconnectOptions defaults() {
    return new ReconnectOptions(DEFAULT_SESSION_WINDOW, DEFAULT_WORKER_GRACE,
        DEFAULT_LINK_LOSS_GRACE);
  }

  /** From seconds, as the command line gives them. */
  public static ReconnectOptions ofSeconds(double sessionWindow, double workerGrace,
      double linkLossGrace) {
    return new ReconnectOptions(seconds(sessionWindow, "--reconnect-window"),
        seconds(workerGrace, "--worker-grace"), seconds(linkLossGrace, "--link-loss-grace"));
  }

  private static Duration seconds(double value, String option) {
    if (!(value >= 0) || Double.isInfinite(value)) {
      throw new IllegalArgumentException(option + " must be seconds >= 0, got " + value);
    }
    return Duration.ofMillis(Math.round(value * 1000));
  }
}
