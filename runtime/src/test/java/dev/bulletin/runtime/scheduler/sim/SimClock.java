package dev.bulletin.runtime.scheduler.sim;

import java.time.Clock;
import java.time.Instant;
import java.time.ZoneId;
import java.time.ZoneOffset;

/** The simulated clock the scheduler reads: it moves only when the event loop moves it. */
final class SimClock extends Clock {
  private long millis;

  SimClock(long startMillis) {
    this.millis = startMillis;
  }

  void set(long millis) {
    if (millis < this.millis) {
      throw new IllegalStateException("time runs forward only: " + millis + " < " + this.millis);
    }
    this.millis = millis;
  }

  @Override
  public ZoneId getZone() {
    return ZoneOffset.UTC;
  }

  @Override
  public Clock withZone(ZoneId zone) {
    return this;
  }

  @Override
  public Instant instant() {
    return Instant.ofEpochMilli(millis);
  }

  @Override
  public long millis() {
    return millis;
  }
}
