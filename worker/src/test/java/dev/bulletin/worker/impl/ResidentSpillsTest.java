package dev.bulletin.worker.impl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.bridge.ObjectStores;
import dev.bulletin.worker.ResidentLimits;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** A client session's end drops its spilled resident values, and only its own user's. */
class ResidentSpillsTest {

  @TempDir
  Path folder;
  private ObjectStore store;
  private ResidentSpills spills;

  @BeforeEach
  void open() {
    store = ObjectStores.inFolder(folder.resolve("store"));
    spills = new ResidentSpills(store, ResidentLimits.DEFAULT);
  }

  @AfterEach
  void close() {
    store.close();
  }

  /** A spill object in the user's namespace, held once (as an adopted spill is). */
  private ObjectKey spill(String user, char fill, Map<String, String> sessionsOfHandles) {
    ObjectKey key = store.put(ObjectKey.of(user, String.valueOf(fill).repeat(32)),
        ByteBuffer.wrap(new byte[64]));
    spills.record(user, key, 64, sessionsOfHandles);
    return key;
  }

  private static Map<String, String> handles(String... handleThenSession) {
    Map<String, String> handles = new LinkedHashMap<>();
    for (int i = 0; i < handleThenSession.length; i += 2) {
      handles.put(handleThenSession[i], handleThenSession[i + 1]);
    }
    return handles;
  }

  @Test
  void aSessionsEndDropsItsHandlesAndASpillGoesWhenNoneOfItsHandlesIsLeft() {
    spill("alice", 'a', handles("h1", "s1", "h2", "s2"));
    assertEquals(1, store.stats().referenced());

    assertEquals(1, spills.dropSession("alice", "s1", true));
    assertEquals(Set.of("h2"), spills.of("alice").keySet(), "only s2's handle is left");
    assertTrue(spills.droppedOf("alice").get("h1").contains("session that kept it ended"));
    assertEquals(1, store.stats().referenced(), "the spill still holds s2's value");

    assertEquals(1, spills.dropSession("alice", "s2", true));
    assertTrue(spills.of("alice").isEmpty());
    assertEquals(0, store.stats().referenced(), "the spill object went back to the store");
  }

  @Test
  void anotherUsersSessionDropsNothingEvenWithTheSameSessionId() {
    spill("alice", 'a', handles("h1", "s1"));
    assertEquals(0, spills.dropSession("bob", "s1", true));
    assertEquals(Set.of("h1"), spills.of("alice").keySet());
    assertEquals(1, store.stats().referenced());
  }

  @Test
  void aSpillRecordedAfterItsSessionEndedDropsThatSessionsHandlesAtOnce() {
    spills.dropSession("alice", "s1", true); // the end raced the executor's spill
    spill("alice", 'b', handles("h1", "s1"));
    assertTrue(spills.of("alice").isEmpty());
    assertTrue(spills.droppedOf("alice").containsKey("h1"));
    assertEquals(0, store.stats().referenced());
  }

  @Test
  void aReleaseDropsWhatTheSessionKeptButNotWhatItKeepsLater() {
    spill("alice", 'a', handles("h1", "s1"));
    assertEquals(1, spills.dropSession("alice", "s1", false));
    spill("alice", 'b', handles("h2", "s1")); // kept after the release: the session goes on
    assertEquals(Set.of("h2"), spills.of("alice").keySet());
    assertEquals(1, store.stats().referenced());
  }

  @Test
  void theListenerHearsEachSpillHeldAndLetGoAndAForgottenSpillSaysWhy() {
    java.util.List<String> heard = new java.util.ArrayList<>();
    spills.listen(new dev.bulletin.worker.SpillListener() {
      @Override
      public void spilled(ObjectKey spill, long size, Map<String, String> handles) {
        heard.add("+" + spill.id().hex().charAt(0) + " " + new java.util.TreeMap<>(handles));
      }

      @Override
      public void gone(ObjectKey spill) {
        heard.add("-" + spill.id().hex().charAt(0));
      }
    });
    ObjectKey first = spill("alice", 'a', handles("h1", "s1", "h2", "s1"));
    spill("alice", 'b', handles("h1", "s1", "h2", "s1")); // spilled again: a is superseded
    assertEquals(java.util.List.of("+a {h1=s1, h2=s1}", "-a", "+b {h1=s1, h2=s1}"), heard);

    // Another user's namespace names none of alice's spills.
    assertEquals(0, spills.forget("bob", ObjectKey.of("bob", "b".repeat(32)), "moved"));
    assertEquals(0, spills.forget("alice", first, "moved"), "a is gone already");
    ObjectKey second = ObjectKey.of("alice", "b".repeat(32));
    assertEquals(2, spills.forget("alice", second, "they were restored on worker w2"));
    assertTrue(spills.of("alice").isEmpty());
    assertEquals("they were restored on worker w2", spills.droppedOf("alice").get("h1"));
    assertEquals("-b", heard.get(heard.size() - 1));
    assertEquals(0, store.stats().referenced());
  }
}
