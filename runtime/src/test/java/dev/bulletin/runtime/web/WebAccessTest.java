package dev.bulletin.runtime.web;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.runtime.config.RuntimeConfig;
import dev.bulletin.runtime.identity.TokenRegistry;
import java.util.List;
import org.junit.jupiter.api.Test;

class WebAccessTest {
  private static final String OWNER = "owner-token-0123456789";
  private static final String WORKER = "worker-token-0123456789";
  private static final String METRICS = "metrics-token-0123456789";
  private static final String BOB = "bob-token-0123456789abc";
  private static final String ROOT = "root-token-0123456789ab";

  private final TokenRegistry tokens = TokenRegistry.of(OWNER, "ada", WORKER,
      new RuntimeConfig(List.of(new RuntimeConfig.User("bob", "vision", BOB),
          new RuntimeConfig.User("root", "ops", ROOT, true, null))));
  private final WebAccess access = new WebAccess(tokens, METRICS);

  private static int refused(WebAccess.Decision decision) {
    return assertInstanceOf(WebAccess.Decision.Refused.class, decision).status();
  }

  @Test
  void metricsAreOpenOnLoopbackAndTakeTheMetricsOrAnAdminsTokenElsewhere() {
    assertInstanceOf(WebAccess.Decision.Allowed.class, access.metrics(true, null));
    assertInstanceOf(WebAccess.Decision.Allowed.class, access.metrics(false, "Bearer " + METRICS));
    assertInstanceOf(WebAccess.Decision.Allowed.class, access.metrics(false, "Bearer " + OWNER));
    assertInstanceOf(WebAccess.Decision.Allowed.class, access.metrics(false, "Bearer " + ROOT));
    assertEquals(401, refused(access.metrics(false, null)));
    assertEquals(401, refused(access.metrics(false, "Bearer not-a-token-of-this-cluster")));
    // A plain user (and a worker) may not read every user's usage off the metrics.
    assertEquals(403, refused(access.metrics(false, "Bearer " + BOB)));
    assertEquals(403, refused(access.metrics(false, "Bearer " + WORKER)));
  }

  @Test
  void theApiTakesUsersTokensOnlyAndNeverTheMetricsOrWorkerToken() {
    var bob = assertInstanceOf(WebAccess.Decision.Allowed.class, access.user("Bearer " + BOB));
    assertEquals("bob", bob.identity().user());
    assertFalse(bob.identity().seesAll());
    assertEquals(401, refused(access.user("Bearer " + METRICS)));
    assertEquals(401, refused(access.user("Bearer wrong-token-0123456789")));
    assertEquals(401, refused(access.user(null)));
    assertEquals(403, refused(access.user("Bearer " + WORKER)));
  }

  @Test
  void aMetricsTokenMustBeLongAndItsOwn() {
    assertThrows(IllegalArgumentException.class, () -> new WebAccess(tokens, "short"));
    var shared = assertThrows(IllegalArgumentException.class, () -> new WebAccess(tokens, BOB));
    assertTrue(shared.getMessage().contains("BULLETIN_METRICS_TOKEN"), shared.getMessage());
  }

  @Test
  void loopbackIsDecidedFromLiteralAddressesOnly() {
    assertTrue(WebAccess.loopback("127.0.0.1"));
    assertTrue(WebAccess.loopback("::1"));
    assertTrue(WebAccess.loopback("0:0:0:0:0:0:0:1"));
    assertFalse(WebAccess.loopback("10.0.0.5"));
    assertFalse(WebAccess.loopback("localhost"));
    assertFalse(WebAccess.loopback(null));
  }
}
