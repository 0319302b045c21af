package dev.bulletin.runtime.journal.impl;

import java.io.IOException;
import java.nio.file.Path;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Real log files whose fsyncs a test can hold back (a disk that syncs late): while held, every
 * {@code force} waits until {@link #release}. Writes go through at once.
 */
public final class HeldSyncs implements FrameSink.Opener {
  private final AtomicReference<CountDownLatch> gate = new AtomicReference<>();
  private final AtomicInteger completed = new AtomicInteger();
  private final AtomicInteger waiting = new AtomicInteger();

  /** From now on fsyncs wait (those under way finish). */
  public void hold() {
    gate.set(new CountDownLatch(1));
  }

  /** Lets the held fsyncs, and later ones, through. */
  public void release() {
    CountDownLatch held = gate.getAndSet(null);
    if (held != null) {
      held.countDown();
    }
  }

  /** How many fsyncs completed. */
  public int completed() {
    return completed.get();
  }

  /** How many fsyncs are waiting for {@link #release} now. */
  public int waiting() {
    return waiting.get();
  }

  @Override
  public FrameSink open(Path file) throws IOException {
    return new DelegatingSink(FrameSink.FILES.open(file)) {
      @Override
      public void force() throws IOException {
        CountDownLatch held = gate.get();
        if (held != null) {
          waiting.incrementAndGet();
          try {
            if (!held.await(120, TimeUnit.SECONDS)) {
              throw new IOException("the test never released the held fsync");
            }
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException(e);
          } finally {
            waiting.decrementAndGet();
          }
        }
        super.force();
        completed.incrementAndGet();
      }
    };
  }
}
