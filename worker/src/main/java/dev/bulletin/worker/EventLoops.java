package dev.bulletin.worker;

import io.vertx.core.Vertx;
import io.vertx.core.VertxOptions;
import java.util.concurrent.TimeUnit;
import java.util.logging.Logger;

/** The one place where the runtime and the worker agents make their Vert.x instance. */
public final class EventLoops {

  /**
   * An event loop held this long prints its stack with the "blocked" warning; shorter holds print
   * one line. A runtime starts on a shared login node, where a loaded machine can hold the
   * starting loop (class loading, the journal's restore) for a few seconds: that is worth a line
   * in the log, not a stack trace before the start's own messages. A loop held longer than this
   * is a bug, and its stack says where.
   */
  static final long STACK_AFTER_SECONDS = 10;

  private EventLoops() {}

  public static Vertx create() {
    // Linux's epoll where its native library loads (the worker module ships it), else the JDK's
    // selector: Vert.x falls back by itself, and the log says which and why.
    Vertx vertx = Vertx.vertx(new VertxOptions()
        .setPreferNativeTransport(true)
        .setWarningExceptionTime(STACK_AFTER_SECONDS)
        .setWarningExceptionTimeUnit(TimeUnit.SECONDS));
    Logger log = Logger.getLogger(EventLoops.class.getName());
    if (vertx.isNativeTransportEnabled()) {
      log.fine("event loops on epoll (native transport)");
    } else {
      log.info("event loops on the JDK's selector: the native epoll transport is unavailable ("
          + vertx.unavailableNativeTransportCause() + ")");
    }
    return vertx;
  }
}
