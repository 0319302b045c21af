package dev.bulletin.runtime.workers;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class ResidentGpusTest {

  private static final String ALICE = ResidentGpus.session("alice", "s1");
  private static final String BOB = ResidentGpus.session("bob", "s2");

  @Test
  void aCallThatKeepsBytesMarksItsGpusAndOneThatKeepsNoneClearsItsOwnMarkOnly() {
    ResidentGpus gpus = new ResidentGpus();
    gpus.callEnded(List.of(0, 1), ALICE, 1 << 20);
    gpus.callEnded(List.of(2), BOB, 4096);
    assertEquals(Map.of(0, ALICE, 1, ALICE, 2, BOB), gpus.snapshot());
    gpus.callEnded(List.of(1, 2), ALICE, 0); // alice deleted hers; bob's on 2 is not hers
    assertEquals(Map.of(0, ALICE, 2, BOB), gpus.snapshot());
  }

  @Test
  void anotherSessionsCallTakesTheGpuAndTheSessionsOwnCallDoesNot() {
    ResidentGpus gpus = new ResidentGpus();
    gpus.callEnded(List.of(0, 1), ALICE, 1 << 20);
    gpus.taken(List.of(0), ALICE);
    assertEquals(Map.of(0, ALICE, 1, ALICE), gpus.snapshot(), "her own next cell");
    gpus.taken(List.of(1), BOB); // the worker spills hers before bob's call runs
    assertEquals(Map.of(0, ALICE), gpus.snapshot());
    gpus.sessionEnded(ALICE);
    assertEquals(Map.of(), gpus.snapshot());
  }
}
