package dev.bulletin.bridge;

import static dev.bulletin.bridge.FileObjectStoreTest.array;
import static dev.bulletin.bridge.FileObjectStoreTest.data;
import static dev.bulletin.bridge.FileObjectStoreTest.key;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Referenced objects beyond the capacity go to local disk and come back on use. */
class SpillTest {

  @TempDir Path folder;

  private ObjectStore store(long capacity, Path spill) {
    return ObjectStores.open(new StoreOptions(folder.resolve("mem"), capacity, spill));
  }

  @Test
  void leastRecentlyUsedReferencedObjectSpillsAndReadsBackTransparently() throws Exception {
    try (ObjectStore store = store(250, folder.resolve("disk"))) {
      store.put(key("ada", 1), data(100, 1));
      store.put(key("ada", 2), data(100, 2));
      store.read(key("ada", 1));
      store.put(key("ada", 3), data(100, 3)); // 2 is the least recently used
      assertTrue(store.info(key("ada", 2)).spilled());
      assertFalse(store.info(key("ada", 1)).spilled());
      assertTrue(Files.exists(folder.resolve("disk/ada").resolve(key("ada", 2).id().hex())));
      assertEquals(new StoreStats(3, 3, 1, 200, 100, 250, 0), store.stats());
      assertArrayEquals(array(data(100, 2)), array(store.read(key("ada", 2))));

      // A call that uses it gets it back in memory, and something else goes to disk.
      try (ObjectStore.Lease lease = store.lease(List.of(key("ada", 2)))) {
        assertTrue(lease.path(key("ada", 2)).startsWith(store.root()));
        assertArrayEquals(array(data(100, 2)), Files.readAllBytes(lease.path(key("ada", 2))));
        assertEquals(1, store.stats().spilled());
        // Leased objects are never pushed out, even under pressure.
        store.put(key("ada", 4), data(100, 4));
        assertFalse(store.info(key("ada", 2)).spilled());
      }
      // Releasing a spilled object deletes its disk copy at once.
      ObjectKey onDisk = List.of(key("ada", 1), key("ada", 3), key("ada", 4)).stream()
          .filter(k -> store.info(k).spilled()).findFirst().orElseThrow();
      store.release(onDisk);
      assertFalse(store.contains(onDisk));
      assertFalse(Files.exists(folder.resolve("disk/ada").resolve(onDisk.id().hex())));
    }
  }

  @Test
  void fullSpillDiskGivesAClearErrorAndTheStoreKeepsServing() throws Exception {
    Path disk = Files.createDirectories(folder.resolve("tiny"));
    assumeTrue(mountTinyTmpfs(disk), "needs root and mount(8) to make a 64 KiB file system");
    try (ObjectStore store = store(200_000, disk.resolve("spill"))) {
      store.put(key("ada", 1), data(150_000, 1));
      StoreFullException e = assertThrows(StoreFullException.class,
          () -> store.put(key("ada", 2), data(100_000, 2)));
      assertTrue(e.getMessage().contains("spilling failed")
          && e.getMessage().contains(disk.resolve("spill").toString()), e.getMessage());
      assertFalse(store.contains(key("ada", 2)));
      assertFalse(store.info(key("ada", 1)).spilled());
      assertArrayEquals(array(data(150_000, 1)), array(store.read(key("ada", 1))));
      assertEquals(List.of(), FileObjectStoreTest.tempFiles(disk));
      store.release(key("ada", 1));
      store.put(key("ada", 2), data(100_000, 2)); // fine once memory is free
    } finally {
      new ProcessBuilder("umount", disk.toString()).start().waitFor(10, TimeUnit.SECONDS);
    }
  }

  static boolean mountTinyTmpfs(Path at) {
    try {
      Process mount = new ProcessBuilder("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs",
          at.toString()).redirectErrorStream(true).start();
      return mount.waitFor(10, TimeUnit.SECONDS) && mount.exitValue() == 0;
    } catch (Exception e) {
      return false;
    }
  }
}
