package dev.bulletin.bridge.dataport;

import java.util.concurrent.ThreadFactory;
import java.util.concurrent.atomic.AtomicInteger;

/** Thread factories for the data path's pools: daemons, so a stuck transfer never holds exit. */
public final class DaemonThreads {
  private DaemonThreads() {}

  /** Threads named {@code name-1}, {@code name-2}, ... */
  public static ThreadFactory named(String name) {
    AtomicInteger count = new AtomicInteger();
    return task -> {
      Thread thread = new Thread(task, name + "-" + count.incrementAndGet());
      thread.setDaemon(true);
      return thread;
    };
  }
}
