package dev.bulletin.runtime.identity;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneId;
import org.junit.jupiter.api.Test;

class JoinTokensTest {
  /** A clock the test moves, so expiry needs no sleep. */
  private static final class Hands extends Clock {
    Instant now = Instant.parse("2026-11-28T07:00:00Z");

    @Override
    public ZoneId getZone() {
      return ZoneId.of("UTC");
    }

    @Override
    public Clock withZone(ZoneId zone) {
      return this;
    }

    @Override
    public Instant instant() {
      return now;
    }
  }

  private final Hands clock = new Hands();
  private final JoinTokens tokens = JoinTokens.inMemory(clock);

  @Test
  void aTokenNamesItsWorkerOnceAndIsRefusedTheSecondTime() {
    String token = tokens.issue("worker-a", Duration.ofMinutes(5));

    assertEquals(new JoinTokens.Redeemed.Worker("worker-a"), tokens.redeem(token));
    JoinTokens.Redeemed again = tokens.redeem(token);
    assertTrue(assertInstanceOf(JoinTokens.Redeemed.Refused.class, again).reason()
        .contains("already used"));
  }

  @Test
  void anExpiredTokenIsRefused() {
    String token = tokens.issue("worker-a", Duration.ofMinutes(5));
    clock.now = clock.now.plus(Duration.ofMinutes(5));

    assertTrue(assertInstanceOf(JoinTokens.Redeemed.Refused.class, tokens.redeem(token))
        .reason().contains("expired"));
  }

  @Test
  void tokensAreDistinctAndAGuessedOneIsRefused() {
    String a = tokens.issue("a", Duration.ofMinutes(5));
    String b = tokens.issue("a", Duration.ofMinutes(5));

    assertNotEquals(a, b);
    assertTrue(a.length() >= JoinTokens.PREFIX.length() + 43, "256 random bits");
    assertInstanceOf(JoinTokens.Redeemed.Refused.class,
        tokens.redeem(a.substring(0, a.length() - 1) + (a.endsWith("A") ? "B" : "A")));
    assertInstanceOf(JoinTokens.Redeemed.Refused.class, tokens.redeem("worker-token"));
    assertInstanceOf(JoinTokens.Redeemed.Refused.class, tokens.redeem(null));
    // the guesses did not spend the real ones
    assertEquals(new JoinTokens.Redeemed.Worker("a"), tokens.redeem(a));
    assertEquals(new JoinTokens.Redeemed.Worker("a"), tokens.redeem(b));
  }

  @Test
  void aLifetimeOutOfBoundsOrAMissingWorkerIsAnError() {
    assertThrows(IllegalArgumentException.class, () -> tokens.issue("a", Duration.ZERO));
    assertThrows(IllegalArgumentException.class, () -> tokens.issue("a", Duration.ofDays(8)));
    assertThrows(IllegalArgumentException.class, () -> tokens.issue(" ", Duration.ofMinutes(1)));
  }
}
