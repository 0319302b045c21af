package dev.bulletin.runtime.identity.impl;

import dev.bulletin.runtime.identity.JoinTokens;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.security.SecureRandom;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.Base64;
import java.util.HexFormat;
import java.util.concurrent.ConcurrentHashMap;

/** {@link JoinTokens} in a map from each token's SHA-256 to the worker and its deadline. */
public final class MemoryJoinTokens implements JoinTokens {
  private static final SecureRandom RANDOM = new SecureRandom();
  private static final Duration LONGEST = Duration.ofDays(7);

  private record Pending(String workerId, Instant expires) {}

  private final ConcurrentHashMap<String, Pending> byDigest = new ConcurrentHashMap<>();
  private final Clock clock;

  public MemoryJoinTokens(Clock clock) {
    this.clock = clock;
  }

  @Override
  public String issue(String workerId, Duration ttl) {
    if (workerId == null || workerId.isBlank()) {
      throw new IllegalArgumentException("a join token needs the worker id it is for");
    }
    if (ttl.isNegative() || ttl.isZero() || ttl.compareTo(LONGEST) > 0) {
      throw new IllegalArgumentException("a join token's lifetime must be positive and at most "
          + LONGEST.toDays() + " days, not " + ttl);
    }
    Instant now = clock.instant();
    // Issuing is where the map would grow: the expired are dropped here.
    byDigest.values().removeIf(p -> !p.expires().isAfter(now));
    byte[] secret = new byte[32];
    RANDOM.nextBytes(secret);
    String token = PREFIX + Base64.getUrlEncoder().withoutPadding().encodeToString(secret);
    byDigest.put(digest(token), new Pending(workerId, now.plus(ttl)));
    return token;
  }

  @Override
  public Redeemed redeem(String token) {
    if (token == null || !token.startsWith(PREFIX)) {
      return new Redeemed.Refused("not a join token (they start with " + PREFIX
          + "): ask the cluster's owner for one (bulletin worker join-token ID)");
    }
    // remove() makes the use atomic: of two redemptions racing, one gets it.
    Pending pending = byDigest.remove(digest(token));
    if (pending == null) {
      return new Redeemed.Refused("unknown or already used join token: each token joins one"
          + " worker once; ask the cluster's owner for a new one (bulletin worker join-token ID)");
    }
    if (!pending.expires().isAfter(clock.instant())) {
      return new Redeemed.Refused("expired join token (it was good until " + pending.expires()
          + "); ask the cluster's owner for a new one (bulletin worker join-token ID)");
    }
    return new Redeemed.Worker(pending.workerId());
  }

  private static String digest(String token) {
    try {
      return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256")
          .digest(token.getBytes(StandardCharsets.UTF_8)));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }
}
