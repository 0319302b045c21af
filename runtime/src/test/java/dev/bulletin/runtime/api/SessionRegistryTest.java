package dev.bulletin.runtime.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.bridge.ObjectStores;
import dev.bulletin.runtime.control.ControlPlane;
import dev.bulletin.runtime.control.Journaling;
import dev.bulletin.runtime.control.OnLoop;
import dev.bulletin.runtime.control.PolicyPass;
import dev.bulletin.runtime.identity.Identity;
import dev.bulletin.runtime.journal.StateJournal;
import dev.bulletin.runtime.scheduler.policy.PolicyConfig;
import io.vertx.core.Context;
import io.vertx.core.Vertx;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The reconnect window of detached sessions, on a real Vert.x loop and its timers. */
class SessionRegistryTest {
  private static final Identity ALICE = new Identity("alice", "vision", false);
  private static final Duration WINDOW = Duration.ofMillis(200);

  @TempDir Path folder;
  private Vertx vertx;
  private Context context;
  private ObjectStore store;
  private SessionRegistry sessions;

  @BeforeEach
  void setUp() throws Exception {
    vertx = Vertx.vertx();
    context = vertx.getOrCreateContext();
    store = ObjectStores.inFolder(folder);
    sessions = OnLoop.call(context, () -> new SessionRegistry(vertx, new ControlPlane(context,
        store, new PolicyPass(PolicyConfig.defaults(), Clock.systemUTC(), Duration.ofSeconds(60),
            1), 1 << 20, 60, Map.of(), new Journaling(StateJournal.disabled())), WINDOW));
  }

  @AfterEach
  void tearDown() {
    vertx.close().await();
    store.close();
  }

  /**
   * Timer ids are boxed in the registry: a window whose id was past the Long cache (128 on)
   * once never ended its session, so a long-running runtime kept every killed client's objects.
   */
  @ParameterizedTest(name = "{0} timers set before")
  @ValueSource(ints = {0, 300})
  void aDetachedSessionEndsOnceItsWindowPasses(int timersBefore) throws Exception {
    OnLoop.call(context, () -> {
      for (int i = 0; i < timersBefore; i++) {
        vertx.cancelTimer(vertx.setTimer(60_000, ignored -> { }));
      }
      sessions.restoreDetached("session-of-alice", ALICE, 0);
      // In the same turn of the loop: no timer can have run, however slow the machine.
      assertTrue(sessions.find("session-of-alice").isPresent(),
          "a detached session is kept within its window");
      return null;
    });
    long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
    while (OnLoop.call(context, () -> sessions.find("session-of-alice").isPresent())
        && System.nanoTime() < deadline) {
      Thread.sleep(20);
    }
    assertTrue(OnLoop.call(context, () -> sessions.find("session-of-alice").isEmpty()),
        "the session ended once its " + WINDOW.toMillis() + " ms window passed");
    assertEquals(0, OnLoop.call(context, sessions::detached));
  }
}
