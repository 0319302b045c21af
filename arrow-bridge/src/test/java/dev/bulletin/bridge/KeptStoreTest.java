package dev.bulletin.bridge;

import static dev.bulletin.bridge.FileObjectStoreTest.array;
import static dev.bulletin.bridge.FileObjectStoreTest.data;
import static dev.bulletin.bridge.FileObjectStoreTest.key;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A store reopened after its runtime died (ObjectStores.reopen, docs/durability.md): the
 * objects the earlier run left are kept, unreferenced, its half-done writes are gone, and what
 * nobody retains is deleted by dropUnreferencedObjects.
 */
class KeptStoreTest {

  @TempDir Path folder;

  private StoreOptions options() {
    return new StoreOptions(folder.resolve("mem"), 1 << 20, folder.resolve("spill"));
  }

  @Test
  void reopeningKeepsObjectsDropsTemporariesAndDeletesWhatNobodyRetains() throws Exception {
    ObjectKey kept = key("ada", 1);
    ObjectKey unknown = key("ada", 2);
    ObjectStore first = ObjectStores.open(options());
    first.put(kept, data(1000, 1));
    first.put(unknown, data(500, 2));
    Path temporary = first.folderOf("ada").resolve(".tmp-cut-short");
    Files.write(temporary, new byte[10]);
    // The runtime dies here: the store is not closed (closing deletes it).

    try (ObjectStore second = ObjectStores.reopen(options())) {
      assertEquals(2, second.objectCount());
      assertFalse(Files.exists(temporary), "a write the crash cut short is gone");
      assertTrue(second.retainIfPresent(kept));
      assertEquals(1, second.dropUnreferencedObjects());
      assertTrue(second.contains(kept));
      assertFalse(second.contains(unknown));
      assertFalse(Files.exists(second.folderOf("ada").resolve(unknown.id().hex())));
      assertArrayEquals(array(data(1000, 1)), second.readSmall(kept));
    }
  }

  @Test
  void openingWithoutKeepingStartsEmptyAsBefore() throws Exception {
    ObjectStore first = ObjectStores.open(options());
    first.put(key("ada", 1), data(1000, 1));
    try (ObjectStore second = ObjectStores.open(options())) {
      assertEquals(0, second.objectCount());
      assertFalse(second.contains(key("ada", 1)));
    }
  }
}
