package dev.bulletin.worker;

import io.vertx.core.Vertx;
import io.vertx.core.VertxOptions;
import java.util.concurrent.TimeUnit;

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
    // The JDK's selector, not Netty's native epoll transport: alternating the two three times
    // on the no-op call path (examples/overhead_benchmark.py --only bulletin, 2 cores), epoll's
    // p50 was 5-13 % longer and its synchronous call rate 5-13 % lower, and at 1,000 simulated
    // workers (make bench-scale) it moved nothing beyond the noise.
    return Vertx.vertx(new VertxOptions()
        .setWarningExceptionTime(STACK_AFTER_SECONDS)
        .setWarningExceptionTimeUnit(TimeUnit.SECONDS));
  }
}
