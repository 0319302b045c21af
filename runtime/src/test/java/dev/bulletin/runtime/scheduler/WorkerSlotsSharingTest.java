package dev.bulletin.runtime.scheduler;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** The runtime's book of a worker's slots with shares of GPUs (issue 16.6). */
class WorkerSlotsSharingTest {
  private static final Demand HALF = new Demand(0, 1, 0, 4);
  private static final Demand QUARTER = new Demand(0, 1, 0, 2);
  private static final Demand WHOLE = new Demand(1, 1, 0);

  @Test
  void sharesFillOneGpuAndFreeItOnlyWithTheLastOne() {
    WorkerSlots slots = new WorkerSlots("w", 2, true, 8, 0);
    slots.reserve(HALF, List.of(0));
    slots.reserve(HALF, List.of(0));
    assertEquals(Set.of(1), slots.freeGpuIds(), "a shared GPU is not free for whole-GPU calls");
    assertEquals(Map.of(0, 1.0), slots.sharedGpus());
    assertEquals(1.0, slots.reservedGpuShare());
    assertThrows(IllegalStateException.class, () -> slots.reserve(QUARTER, List.of(0)),
        "eight eighths at most");

    slots.free(HALF, List.of(0));
    assertEquals(Map.of(0, 0.5), slots.sharedGpus());
    assertEquals(Set.of(1), slots.freeGpuIds());
    slots.free(HALF, List.of(0));
    assertEquals(Set.of(0, 1), slots.freeGpuIds());
    assertTrue(slots.sharedGpus().isEmpty());
  }

  @Test
  void aWholeGpuCallIsNeverBookedOnASharedGpuNorAShareOnAWholeOne() {
    WorkerSlots slots = new WorkerSlots("w", 2, true, 8, 0);
    slots.reserve(QUARTER, List.of(0));
    slots.reserve(WHOLE, List.of(1));
    assertThrows(IllegalStateException.class, () -> slots.reserve(WHOLE, List.of(0)));
    assertThrows(IllegalStateException.class, () -> slots.reserve(QUARTER, List.of(1)));
    assertEquals(1.25, slots.reservedGpuShare());
  }

  @Test
  void aShareFitsNowWhileSomeGpuHasRoomAndTheCpusAllowIt() {
    WorkerSlots slots = new WorkerSlots("w", 1, true, 2, 0);
    slots.reserve(HALF, List.of(0));
    assertTrue(slots.fitsNow(HALF));
    assertFalse(slots.fitsNow(WHOLE));
    slots.reserve(QUARTER, List.of(0));
    assertFalse(slots.fitsNow(HALF), "2 CPUs: the CPUs bound the calls a GPU takes too");
    assertEquals("no GPU has 0.5 of a GPU free to share",
        WorkerSlots.whyNoneFitsNow(new Demand(0, 1e-3, 0, 4), List.of(slots)));
  }
}
