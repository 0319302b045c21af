package dev.bulletin.runtime.workers;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class ResidentGpusTest {

  private static final String ALICE = ResidentGpus.key("alice", "s1");
  private static final String BOB = ResidentGpus.key("bob", "s2");

  @Test
  void aCallThatKeepsBytesMarksItsGpusAndOneThatKeepsNoneClearsItsOwnMarkOnly() {
    ResidentGpus gpus = new ResidentGpus();
    gpus.callEnded(List.of(0, 1), "alice", "s1", 1 << 20);
    gpus.callEnded(List.of(2), "bob", "s2", 4096);
    assertEquals(Map.of(0, ALICE, 1, ALICE, 2, BOB), gpus.snapshot());
    gpus.callEnded(List.of(1, 2), "alice", "s1", 0); // alice deleted hers; bob's on 2 is not hers
    assertEquals(Map.of(0, ALICE, 2, BOB), gpus.snapshot());
  }

  @Test
  void anotherUsersCallTakesTheGpuAndTheSameUsersCallsDoNot() {
    ResidentGpus gpus = new ResidentGpus();
    gpus.callEnded(List.of(0, 1), "alice", "s1", 1 << 20);
    gpus.taken(List.of(0), "alice"); // her next cell, or her other notebook: same executor
    assertEquals(Map.of(0, ALICE, 1, ALICE), gpus.snapshot());
    gpus.taken(List.of(1), "bob"); // the worker spills hers before bob's call runs
    assertEquals(Map.of(0, ALICE), gpus.snapshot());
    assertEquals(true, gpus.keepsFor("alice"));
    assertEquals(false, gpus.keepsFor("bob"), "bob keeps nothing here: his call took a GPU");
    gpus.sessionEnded("alice", "s2");
    assertEquals(Map.of(0, ALICE), gpus.snapshot(), "another session's end leaves hers");
    gpus.sessionEnded("alice", "s1");
    assertEquals(Map.of(), gpus.snapshot());
    assertEquals(false, gpus.keepsFor("alice"));
  }
}
