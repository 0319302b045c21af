package dev.bulletin.bridge.impl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.bridge.StoreArena;
import dev.bulletin.bridge.UserFolder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The host arena's accounting, its handout by rename, its per-user share and its give-back. */
class FileStoreArenaTest {
  static final long MIB = 1 << 20;

  @TempDir Path root;
  Path meminfo;
  Path alice;
  Path bob;
  FileStoreArena arena;

  @BeforeEach
  void setUp() throws Exception {
    meminfo = root.resolve("meminfo");
    memAvailable(900_000);
    alice = Files2.ownerOnlyFolder(root.resolve("alice"));
    bob = Files2.ownerOnlyFolder(root.resolve("bob"));
  }

  @AfterEach
  void tearDown() {
    if (arena != null) {
      arena.close();
    }
  }

  /** A folder of this process's own account. */
  static UserFolder own(Path folder) {
    try {
      return UserFolder.of(folder, -1, -1);
    } catch (java.io.IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }

  void memAvailable(long kib) throws Exception {
    Files.writeString(meminfo, "MemTotal:        1000000 kB\nMemFree:          10 kB\n"
        + "MemAvailable:   " + kib + " kB\n");
  }

  FileStoreArena start(long budget) {
    arena = new FileStoreArena(root, budget, new MemoryPressure(meminfo));
    return arena;
  }

  /** An arena of {@code budget} whose ladder of files is filled (18 + 10 MiB for 32 MiB). */
  void startFilled(long budget) throws Exception {
    start(budget);
    waitForTheLadder();
  }

  void waitForTheLadder() throws Exception {
    long ladder = FileStoreArena.ladder(arena.stats().budgetBytes()).stream()
        .mapToLong(Long::longValue).sum();
    waitFor(() -> arena.stats().pooledBytes() == ladder, "the ladder to fill");
  }

  static void waitFor(BooleanSupplier condition, String what) throws InterruptedException {
    long deadline = System.nanoTime() + 20_000_000_000L;
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("timed out waiting for " + what);
      }
      Thread.sleep(20);
    }
  }

  @Test
  void theLadderFillsTheBudgetLargestFirst() {
    assertEquals(List.of(18 * MIB, 10 * MIB), FileStoreArena.ladder(32 * MIB));
    assertEquals(List.of(), FileStoreArena.ladder(5 * MIB));
  }

  @Test
  void fillsInTheBackgroundAndHandsOutByRenameIntoTheUsersFolder() throws Exception {
    startFilled(32 * MIB);
    Path pool = root.resolve(FileStoreArena.FOLDER);
    assertEquals("rwx------", PosixFilePermissions.toString(Files.getPosixFilePermissions(pool)));

    StoreArena.Handout got = arena.handOut(own(alice), "alice", 5 * MIB, ".stage-s1-spare-1");
    assertEquals(10 * MIB, got.size(), "the smallest file that fits");
    Path handed = alice.resolve(".stage-s1-spare-1");
    assertEquals(10 * MIB, Files.size(handed));
    assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(handed)));
    try (var left = Files.list(pool)) {
      assertEquals(1, left.count(), "the file left the pool: it is alice's now");
    }
    StoreArena.Stats stats = arena.stats();
    assertEquals(18 * MIB, stats.pooledBytes());
    assertEquals(10 * MIB, stats.handedOutBytes(), "counted until it is used");
    assertEquals(1, stats.handOuts());

    // Used (renamed to an object, or deleted): no longer counted; a file of the size asked
    // for is made again.
    Files.delete(handed);
    waitFor(() -> arena.stats().handedOutBytes() == 0
        && arena.stats().pooledBytes() == 24 * MIB, "the refill of 6 MiB");
  }

  @Test
  void oneUserCannotTakeTheWholeArenaFromTheOthers() throws Exception {
    startFilled(32 * MIB);
    // Holding none, a user may take any one file, even more than half the budget.
    assertEquals(18 * MIB, arena.handOut(own(alice), "alice", 17 * MIB, ".a1").size());
    StoreArena.Handout more = arena.handOut(own(alice), "alice", 4 * MIB, ".a2");
    assertEquals(0, more.size(), "alice holds her share: 18 + 10 MiB is over half of 32");
    assertFalse(more.later(), "and asking again will not change that");
    assertFalse(Files.exists(alice.resolve(".a2")));
    assertEquals(10 * MIB, arena.handOut(own(bob), "bob", 4 * MIB, ".b1").size(),
        "bob still gets his");
    assertTrue(Files.exists(bob.resolve(".b1")));
  }

  @Test
  void aRequestLargerThanEveryFileGrowsTheArenaWithinItsBudget() throws Exception {
    startFilled(32 * MIB);
    StoreArena.Handout none = arena.handOut(own(alice), "alice", 24 * MIB, ".a1");
    assertEquals(0, none.size());
    assertTrue(none.later(), "a 24 MiB file is being made");
    waitFor(() -> arena.stats().pooledBytes() == 24 * MIB, "the 24 MiB file");
    assertTrue(arena.stats().givenBack() >= 2, "smaller files made room for it");
    assertEquals(24 * MIB, arena.handOut(own(alice), "alice", 24 * MIB, ".a1").size());
    StoreArena.Handout over = arena.handOut(own(bob), "bob", 40 * MIB, ".b1");
    assertEquals(0, over.size());
    assertFalse(over.later(), "over the budget: never made");
  }

  @Test
  void aRequestTheHandedOutFilesLeaveNoRoomForIsRefusedNotPromised() throws Exception {
    startFilled(32 * MIB);
    Path carol = Files2.ownerOnlyFolder(root.resolve("carol"));
    assertEquals(18 * MIB, arena.handOut(own(bob), "bob", 17 * MIB, ".b1").size());
    assertEquals(10 * MIB, arena.handOut(own(carol), "carol", 9 * MIB, ".c1").size());
    // 28 MiB are held by writers and not used yet: a 10 MiB file would break the budget until
    // they are, so "later" would have alice ask again and again for nothing.
    StoreArena.Handout none = arena.handOut(own(alice), "alice", 9 * MIB, ".a1");
    assertEquals(0, none.size());
    assertFalse(none.later(), "no file can be made while bob and carol hold theirs");
    // Bob's write used his file: there is room again, and a file for alice is made.
    Files.delete(bob.resolve(".b1"));
    waitFor(() -> arena.handOut(own(alice), "alice", 9 * MIB, ".a1").size() >= 9 * MIB,
        "alice's file");
    assertTrue(Files.exists(alice.resolve(".a1")));
  }

  /** A 64 MiB arena whose ladder (34 + 18 + 10 MiB) is filled; tails over {@code tail} are long. */
  void startWithLongTailsOver(long tail) throws Exception {
    arena = new FileStoreArena(root, 64 * MIB, new MemoryPressure(meminfo), tail);
    waitForTheLadder();
  }

  @Test
  void aFileFarLongerThanTheWriteWaitsForOneOfItsSizeWhereTheBudgetHasRoom() throws Exception {
    startWithLongTailsOver(4 * MIB); // 256 MiB in a real store
    // Alice's 20 MiB write takes the 34 MiB file (a tail under twice the write) and uses it.
    assertEquals(34 * MIB, arena.handOut(own(alice), "alice", 20 * MIB, ".a1").size());
    Files.delete(alice.resolve(".a1"));
    // 3 MiB: the 10 MiB file fits, with a 6 MiB tail: too long, and 28 MiB are pooled, so a
    // 4 MiB file is made for bob rather than 6 MiB freed at his write.
    StoreArena.Handout later = arena.handOut(own(bob), "bob", 3 * MIB, ".b1");
    assertTrue(later.later(), "a 4 MiB file is being made: " + later);
    waitFor(() -> arena.handOut(own(bob), "bob", 3 * MIB, ".b1").size() > 0, "bob's file");
    assertEquals(4 * MIB, Files.size(bob.resolve(".b1")));
    assertEquals(0, arena.stats().givenBack(), "no pooled file was given back for it");
  }

  @Test
  void aFileFarLongerThanTheWriteIsHandedOutWhenNoneOfItsSizeFits() throws Exception {
    startWithLongTailsOver(4 * MIB);
    // The pool fills the budget: a 4 MiB file would need one given back. The 10 MiB one goes.
    assertEquals(10 * MIB, arena.handOut(own(bob), "bob", 3 * MIB, ".b1").size());
    assertEquals(0, arena.stats().givenBack());
  }

  @Test
  void aUserHoldingHerShareIsRefusedEvenWhenNoFileFits() throws Exception {
    startFilled(32 * MIB);
    assertEquals(18 * MIB, arena.handOut(own(alice), "alice", 17 * MIB, ".a1").size());
    StoreArena.Handout none = arena.handOut(own(alice), "alice", 12 * MIB, ".a2");
    assertEquals(0, none.size());
    assertFalse(none.later(), "18 + 12 MiB is over her half of 32: no file is made for her");
    assertEquals(10 * MIB, arena.stats().pooledBytes(), "and none was given back for it");
  }

  @Test
  void givesItsPoolBackWhileMemoryIsShortAndFillsAgainAfter() throws Exception {
    startFilled(32 * MIB);
    memAvailable(50_000); // 5 % of the machine available
    waitFor(() -> arena.stats().pooledBytes() == 0, "the pool to be given back");
    assertEquals(2, arena.stats().givenBack());
    try (var left = Files.list(root.resolve(FileStoreArena.FOLDER))) {
      assertEquals(0, left.count(), "the files are deleted: their memory is the machine's");
    }
    assertEquals(0, arena.handOut(own(alice), "alice", 4 * MIB, ".a1").size());
    memAvailable(900_000);
    // Made again: the 4 MiB alice asked for first, then the ladder's 18 and 10 MiB.
    waitFor(() -> arena.stats().pooledBytes() == 32 * MIB, "the pool to be made again");
    assertEquals(4 * MIB, arena.handOut(own(alice), "alice", 4 * MIB, ".a1").size());
  }

  @Test
  void aHandedOutFileBelongsToTheOwnerOfTheFolderItGoesTo() throws Exception {
    Assumptions.assumeTrue("root".equals(System.getProperty("user.name")),
        "changing a file's owner needs root");
    startFilled(32 * MIB);
    UserFolder nobodys = UserFolder.of(bob, 65534, 65534);
    assertEquals(10 * MIB, arena.handOut(nobodys, "bob", 4 * MIB, ".b1").size());
    assertEquals(65534, Files.getAttribute(bob.resolve(".b1"), "unix:uid"));
    assertEquals(65534, Files.getAttribute(bob.resolve(".b1"), "unix:gid"));
  }

  @Test
  void closingDeletesThePoolButNotWhatWasHandedOut() throws Exception {
    startFilled(32 * MIB);
    arena.handOut(own(alice), "alice", 4 * MIB, ".a1");
    arena.close();
    arena = null;
    assertFalse(Files.exists(root.resolve(FileStoreArena.FOLDER)));
    assertTrue(Files.exists(alice.resolve(".a1")));
  }
}
