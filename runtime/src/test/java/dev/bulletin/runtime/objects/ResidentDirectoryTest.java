package dev.bulletin.runtime.objects;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.bridge.ObjectStores;
import dev.bulletin.runtime.workers.RecordingLink;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The directory of spilled resident values against a real store and object directory; workers
 * are recording links (no network).
 */
class ResidentDirectoryTest {

  private static final String ALICE = "alice";
  private static final String BOB = "bob";
  private static final ObjectKey SPILL = ObjectKey.of(ALICE, "1".repeat(32));
  private static final ObjectKey LATER = ObjectKey.of(ALICE, "2".repeat(32));
  private static final String H1 = "a".repeat(32);
  private static final String H2 = "b".repeat(32);
  private static final int SIZE = 4096;

  @TempDir Path folder;
  private ObjectStore store;
  private final Map<String, RecordingLink> links = new HashMap<>();
  private ObjectDirectory objects;
  private ResidentDirectory residents;
  private final List<String> journal = new ArrayList<>();

  @BeforeEach
  void setUp() {
    store = ObjectStores.inFolder(folder.resolve("store"));
    links.put("w1", new RecordingLink());
    links.put("w2", new RecordingLink());
    links.put("head", new RecordingLink());
    objects = new ObjectDirectory(store, id -> Optional.ofNullable(links.get(id)));
    residents = objects.residents();
    residents.listen(new ResidentDirectory.Listener() {
      @Override
      public void taken(ResidentSpill spill) {
        journal.add("+" + spill.workerId() + " " + spill.key().id().hex().charAt(0));
      }

      @Override
      public void released(String workerId, ObjectKey key) {
        journal.add("-" + workerId + " " + key.id().hex().charAt(0));
      }
    });
  }

  @AfterEach
  void tearDown() {
    store.close();
  }

  @Test
  void aRemoteSpillMovesAsAKeptObjectAndItsWorkerForgetsItOnceRestoredElsewhere() {
    residents.spilled("w1", true, SPILL, SIZE, "pickle", Map.of(H1, "s1", H2, "s1"));
    assertEquals(1, objects.keptOn("w1"), "kept there for the runtime, as a kept result");
    assertFalse(store.contains(SPILL), "nothing crossed to the runtime's store");

    // On its own worker nothing moves: the agent there has the spill.
    assertEquals(ResidentDirectory.ForCall.NONE, residents.forCall(ALICE, List.of(H1), "w1",
        "w1"));
    // On another, the spill is an input of the call, held while it is placed.
    ResidentDirectory.ForCall call = residents.forCall(ALICE, List.of(H1), "w2", "w1");
    assertEquals(Map.of(H1, SPILL), call.restore());
    assertEquals(List.of(SPILL), objects.toMoveFor("w2", List.of(SPILL)),
        "w2 serves no data port here: it comes through the runtime's store");

    residents.restoredOn(ALICE, call.restore().values(), "w2", "t1");
    assertEquals(List.of(SPILL), links.get("w1").forgotten);
    assertTrue(residents.spillOf(ALICE, H2).isEmpty(), "every handle of the spill moved");
    assertEquals("w2", residents.preferredFor(ALICE, List.of(H2), "w1"),
        "the directory knows better than the handle where the value is now");
    assertEquals(List.of(), links.get("w1").dropped, "the placed call still holds it");
    residents.placementEnded(call);
    assertEquals(List.of(SPILL), links.get("w1").dropped);
    assertEquals(List.of("+w1 1", "-w1 1"), journal);
  }

  @Test
  void anotherUsersHandleIdsResolveNothing() {
    residents.spilled("w1", true, SPILL, SIZE, "pickle", Map.of(H1, "s1"));
    ResidentDirectory.ForCall bobs = residents.forCall(BOB, List.of(H1), "w2", "");
    assertEquals(Map.of(), bobs.restore());
    assertEquals(Map.of(), bobs.lost(), "nor does it say anything of alice's value");
    assertTrue(residents.spillOf(BOB, H1).isEmpty());
    assertEquals("", residents.preferredFor(BOB, List.of(H1), ""));
    residents.restoredOn(BOB, List.of(SPILL), "w2", "t1");
    assertEquals(List.of(), links.get("w1").forgotten, "bob's call moves none of alice's");
    residents.sessionEnded(BOB, "s1", "ended");
    assertTrue(residents.spillOf(ALICE, H1).isPresent(), "bob's session of the same id");
  }

  @Test
  void anEmbeddedSpillIsHeldInTheRuntimesStore() {
    store.put(SPILL, ByteBuffer.wrap(new byte[SIZE])); // the embedded agent's reference
    assertTrue(residents.spilled("head", false, SPILL, SIZE, "", Map.of(H1, "s1")));
    store.release(SPILL); // the agent let it go (spilled again, say) before "gone" arrived
    assertEquals(1, store.stats().referenced(), "the directory holds it");
    ResidentDirectory.ForCall call = residents.forCall(ALICE, List.of(H1), "w1", "head");
    assertEquals(Map.of(H1, SPILL), call.restore());
    assertEquals(List.of(), objects.toMoveFor("w1", List.of(SPILL)), "w1 fetches it from here");
    residents.gone("head", SPILL);
    assertEquals(1, store.stats().referenced(), "the placed call holds it");
    residents.placementEnded(call);
    assertEquals(0, store.stats().referenced());
    assertFalse(residents.spilled("head", false, LATER, SIZE, "", Map.of(H2, "s1")),
        "a spill gone as it was announced is not named");
    assertTrue(residents.spillOf(ALICE, H2).isEmpty());
  }

  @Test
  void aLaterSpillOnAnotherWorkerSupersedesTheEarlierOne() {
    residents.spilled("w1", true, SPILL, SIZE, "pickle", Map.of(H1, "s1"));
    residents.spilled("w2", true, LATER, SIZE, "pickle", Map.of(H1, "s1"));
    assertEquals("w2", residents.spillOf(ALICE, H1).orElseThrow().workerId());
    assertEquals(List.of(SPILL), links.get("w1").forgotten);
    assertEquals(List.of(SPILL), links.get("w1").dropped);
    residents.gone("w1", SPILL); // w1's word that it let go: already let go here
    assertEquals(List.of(SPILL), links.get("w1").dropped);
  }

  @Test
  void aLostWorkersSpillsAreReportedLostWithWhy() {
    residents.spilled("w1", true, SPILL, SIZE, "pickle", Map.of(H1, "s1"));
    objects.workerLost("w1", "lost its connection: reset");
    ResidentDirectory.ForCall call = residents.forCall(ALICE, List.of(H1), "w2", "w1");
    assertEquals(Map.of(), call.restore());
    assertTrue(call.lost().get(H1).contains("worker w1, which lost its connection"),
        call.lost().toString());
  }

  @Test
  void aValueLiveOnAnotherWorkersGpuIsSaidToBeThere() {
    ResidentDirectory.ForCall call = residents.forCall(ALICE, List.of(H1), "w2", "w1");
    assertTrue(call.lost().get(H1).contains("kept on a GPU of worker w1 (not spilled)"));
  }

  @Test
  void aValueIsNeverSpilledUntilSpilledAndLiveWhereItWasRestoredSince() {
    assertTrue(residents.neverSpilled(ALICE, List.of(H1)));
    assertEquals("", residents.restoredLiveOn(ALICE, List.of(H1)));
    residents.spilled("w1", true, SPILL, SIZE, "pickle", Map.of(H1, "s1"));
    assertFalse(residents.neverSpilled(ALICE, List.of(H1)), "spilled: it can move");
    assertTrue(residents.neverSpilled(BOB, List.of(H1)), "bob's namespace knows nothing of it");
    assertTrue(residents.neverSpilled(ALICE, List.of(H1, H2)), "one of them unknown");
    ResidentDirectory.ForCall call = residents.forCall(ALICE, List.of(H1), "w2", "w1");
    residents.restoredOn(ALICE, call.restore().values(), "w2", "t1");
    assertEquals("w2", residents.restoredLiveOn(ALICE, List.of(H1)), "restored on w2 since");
    assertEquals("", residents.restoredLiveOn(BOB, List.of(H1)));
    assertFalse(residents.neverSpilled(ALICE, List.of(H1)));
    objects.workerLost("w2", "lost its connection: reset");
    assertEquals("", residents.restoredLiveOn(ALICE, List.of(H1)), "gone with w2");
    assertFalse(residents.neverSpilled(ALICE, List.of(H1)), "and known to be gone");
  }

  @Test
  void aSessionsEndDropsItsHandlesAndTheSpillNoneIsLeftOf() {
    residents.spilled("w1", true, SPILL, SIZE, "pickle", Map.of(H1, "s1", H2, "s2"));
    residents.sessionEnded(ALICE, "s1", "its session ended");
    assertTrue(residents.spillOf(ALICE, H1).isEmpty());
    assertEquals("its session ended", residents.lostWhy(ALICE, H1).orElseThrow());
    assertTrue(residents.spillOf(ALICE, H2).isPresent());
    assertEquals(List.of(), links.get("w1").dropped);
    residents.sessionEnded(ALICE, "s2", "its session ended");
    assertEquals(List.of(SPILL), links.get("w1").dropped);
    assertEquals(List.of(), links.get("w1").forgotten, "the worker hears DropResident itself");
  }
}
