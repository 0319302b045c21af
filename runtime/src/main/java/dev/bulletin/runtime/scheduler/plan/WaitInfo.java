package dev.bulletin.runtime.scheduler.plan;

import java.time.Instant;
import java.util.List;
import java.util.Optional;

/**
 * What a waiting call's owner sees.
 *
 * @param position 1 for the next call the scheduler considers, counting waiting calls only
 * @param reason why it waits, in words ("group quota reached: 8/8 GPUs")
 * @param eta estimated start: when running calls' walltimes free what it waits for; empty when
 *     nothing running decides it (e.g. a worker must join)
 * @param suggestions what would run sooner ("with 2 GPUs it would start now")
 */
public record WaitInfo(
    int position, WaitCode code, String reason, Optional<Instant> eta, List<String> suggestions) {
  public WaitInfo {
    suggestions = List.copyOf(suggestions);
  }
}
