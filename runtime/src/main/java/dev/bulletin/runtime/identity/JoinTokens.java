package dev.bulletin.runtime.identity;

import dev.bulletin.runtime.identity.impl.MemoryJoinTokens;
import java.time.Clock;
import java.time.Duration;

/**
 * Single-use, short-lived join tokens: the owner hands one to each worker it starts, and the
 * worker exchanges it once for a certificate naming the worker the token was made for. A token
 * is 256 random bits, so guessing one is hopeless however often the join endpoint is tried; the
 * runtime keeps only each token's SHA-256, so a heap dump or log shows no usable token. Tokens
 * live in memory only: a restart voids those not yet used (the owner issues new ones), which
 * errs on the side of a token not outliving the runtime that made it.
 */
public interface JoinTokens {
  /** How long a token stays good by default: enough to start a worker, not to keep one. */
  Duration DEFAULT_TTL = Duration.ofMinutes(15);

  /** The text every token starts with, so a token pasted in the wrong place is recognisable. */
  String PREFIX = "bjt_";

  static JoinTokens inMemory(Clock clock) {
    return new MemoryJoinTokens(clock);
  }

  /** A new token for {@code workerId}, good once within {@code ttl}. */
  String issue(String workerId, Duration ttl);

  /** Uses {@code token} up: the worker it names, or why it is refused. */
  Redeemed redeem(String token);

  /** A redemption's outcome. */
  sealed interface Redeemed {
    /** Good: the token was made for this worker; it is now spent. */
    record Worker(String workerId) implements Redeemed {}

    /** Refused, with a reason that tells the worker's operator what to do. */
    record Refused(String reason) implements Redeemed {}
  }
}
