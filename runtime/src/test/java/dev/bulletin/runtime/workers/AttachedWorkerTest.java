package dev.bulletin.runtime.workers;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.runtime.scheduler.Demand;
import dev.bulletin.runtime.scheduler.WorkerSlots;
import dev.bulletin.worker.CallListener;
import dev.bulletin.worker.CallOutcome;
import dev.bulletin.worker.CallRequest;
import dev.bulletin.worker.WorkerStatusView;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

/** A worker's slots are taken and given back per call, once. */
class AttachedWorkerTest {

  static final Demand ONE_GPU = new Demand(1, 1, 1L << 30);

  /** These tests place nothing on the worker: its link is never used. */
  static final WorkerLink NO_LINK = new WorkerLink() {
    @Override
    public CompletableFuture<CallOutcome> run(CallRequest request, CallListener listener) {
      throw new UnsupportedOperationException();
    }

    @Override
    public void stop(String taskId, String reason) {
      throw new UnsupportedOperationException();
    }

    @Override
    public WorkerStatusView status() {
      throw new UnsupportedOperationException();
    }

    @Override
    public void preempt(String taskId, String reason, Duration grace) {
      throw new UnsupportedOperationException();
    }
  };

  final WorkerSlots slots = new WorkerSlots("w", 2, true, 4, 8L << 30);
  final AttachedWorker worker = new AttachedWorker("w", "host", "", List.of("gpu0", "gpu1"),
      false, 0, "", slots, NO_LINK, "");

  /**
   * A pass keeps its view of a worker until its generation moves (control.WorkerStates): every
   * change a pass reads must move it, and a change that is none must not rebuild the view.
   */
  @Test
  void everyChangeAPassReadsMovesTheGeneration() {
    List<Runnable> changes = List.of(
        () -> worker.reserve("a", ONE_GPU, List.of(0)),
        () -> worker.release("a"),
        () -> worker.residentGpus().callEnded(List.of(1), "ada", "s1", 1024),
        () -> worker.residentGpus().taken(List.of(1), "bob"),
        () -> worker.residentGpus().callEnded(List.of(0), "ada", "s1", 1024),
        () -> worker.residentGpus().callEnded(List.of(0), "ada", "s1", 0),
        () -> worker.residentGpus().callEnded(List.of(0), "ada", "s2", 1024),
        () -> worker.residentGpus().sessionEnded("ada", "s2"),
        () -> worker.drain("replaced"),
        () -> worker.drain(null));
    for (int i = 0; i < changes.size(); i++) {
      long before = worker.generation();
      changes.get(i).run();
      assertTrue(worker.generation() != before, "change " + i + " left the generation as it was");
    }
    long settled = worker.generation();
    worker.release("a");
    worker.residentGpus().sessionEnded("ada", "s2");
    worker.residentGpus().taken(List.of(0), "ada");
    assertEquals(settled, worker.generation(), "nothing changed");
  }

  @Test
  void aReleaseGivesBackExactlyWhatTheCallReserved() {
    worker.reserve("a", ONE_GPU, List.of(1));
    assertEquals(Set.of(0), slots.freeGpuIds());
    assertEquals(3, slots.freeCpus());
    assertEquals(1, worker.runningCalls());

    assertTrue(worker.release("a"));
    assertEquals(Set.of(0, 1), slots.freeGpuIds());
    assertEquals(4, slots.freeCpus());
    assertEquals(8L << 30, slots.freeMemory());
    assertEquals(0, worker.runningCalls());
  }

  @Test
  void aSecondReleaseFreesNothingEvenWhenAnotherCallTookTheSameGpu() {
    worker.reserve("a", ONE_GPU, List.of(0));
    assertTrue(worker.release("a"));
    worker.reserve("b", ONE_GPU, List.of(0));

    assertFalse(worker.release("a"), "a released already");
    assertEquals(Set.of(1), slots.freeGpuIds(), "b keeps GPU 0");
    assertEquals(3, slots.freeCpus());
    assertEquals(1, worker.runningCalls());
  }

  @Test
  void aCallThatNeverReservedHereReleasesNothing() {
    worker.reserve("a", ONE_GPU, List.of(0));
    assertFalse(worker.release("elsewhere"));
    assertEquals(Set.of(1), slots.freeGpuIds());
  }

  @Test
  void aCallReservesOnceAndOnlyFreeSlots() {
    worker.reserve("a", ONE_GPU, List.of(0));
    assertThrows(IllegalStateException.class, () -> worker.reserve("a", ONE_GPU, List.of(1)),
        "a second reservation for the same call would leak the first");
    assertThrows(IllegalStateException.class, () -> worker.reserve("b", ONE_GPU, List.of(0)),
        "GPU 0 is taken");
    assertEquals(Set.of(1), slots.freeGpuIds(), "a refused reservation takes nothing");
    assertEquals(1, worker.runningCalls());
  }
}
