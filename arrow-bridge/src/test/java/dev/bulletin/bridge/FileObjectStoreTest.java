package dev.bulletin.bridge;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class FileObjectStoreTest {

  @TempDir Path folder;

  private static ByteBuffer bytes(String text) {
    return ByteBuffer.wrap(text.getBytes(StandardCharsets.UTF_8));
  }

  private static byte[] array(ByteBuffer buffer) {
    byte[] out = new byte[buffer.remaining()];
    buffer.duplicate().get(out);
    return out;
  }

  @Test
  void identicalBytesShareOneIdAndOneFile() {
    try (ObjectStore store = ObjectStores.inFolder(folder.resolve("s"))) {
      ObjectId first = store.put(bytes("hello"));
      ObjectId second = store.put(bytes("hello"));
      assertEquals(first, second);
      assertEquals(1, store.objectCount());
      assertArrayEquals("hello".getBytes(StandardCharsets.UTF_8), array(store.read(first)));
    }
  }

  @Test
  void objectIsRemovedWhenItsLastReferenceIsReleased() {
    try (ObjectStore store = ObjectStores.inFolder(folder.resolve("s"))) {
      ObjectId id = store.put(bytes("x"));
      store.put(bytes("x"));
      store.release(id);
      assertTrue(store.contains(id));
      store.release(id);
      assertFalse(store.contains(id));
    }
  }

  @Test
  void bytesThatDoNotMatchTheirAnnouncedIdAreRefused() {
    try (ObjectStore store = ObjectStores.inFolder(folder.resolve("s"))) {
      ObjectId claimed = ObjectId.of("something else".getBytes(StandardCharsets.UTF_8));
      ObjectStoreException error =
          assertThrows(ObjectStoreException.class, () -> store.put(claimed, bytes("payload")));
      assertTrue(error.getMessage().contains("corrupted"), error.getMessage());
      assertEquals(0, store.objectCount());
    }
  }

  @Test
  void chunkedUploadBecomesVisibleOnlyOnCommit() {
    try (ObjectStore store = ObjectStores.inFolder(folder.resolve("s"))) {
      ObjectId id = ObjectId.of("abcdef".getBytes(StandardCharsets.UTF_8));
      try (ObjectStore.Upload upload = store.beginUpload(id, 6)) {
        upload.write(bytes("abc"));
        assertFalse(store.contains(id));
        upload.write(bytes("def"));
        assertEquals(id, upload.commit());
      }
      assertTrue(store.contains(id));
      assertEquals(6, store.size(id));
    }
  }

  @Test
  void abandonedUploadLeavesNothingBehind() throws Exception {
    Path root = folder.resolve("s");
    try (ObjectStore store = ObjectStores.inFolder(root)) {
      ObjectId id = ObjectId.of("abcdef".getBytes(StandardCharsets.UTF_8));
      try (ObjectStore.Upload upload = store.beginUpload(id, 6)) {
        upload.write(bytes("abc"));
      }
      assertFalse(store.contains(id));
      try (var files = Files.list(root)) {
        assertEquals(0, files.count());
      }
    }
  }

  @Test
  void truncatedUploadIsRefusedAtCommit() {
    try (ObjectStore store = ObjectStores.inFolder(folder.resolve("s"))) {
      ObjectId id = ObjectId.of("abcdef".getBytes(StandardCharsets.UTF_8));
      try (ObjectStore.Upload upload = store.beginUpload(id, 6)) {
        upload.write(bytes("abc"));
        ObjectStoreException error = assertThrows(ObjectStoreException.class, upload::commit);
        assertTrue(error.getMessage().contains("3 of 6"), error.getMessage());
      }
      assertFalse(store.contains(id));
    }
  }

  @Test
  void retainingAnObjectWrittenByAnotherProcessCountsIt() throws Exception {
    try (ObjectStore store = ObjectStores.inFolder(folder.resolve("s"))) {
      byte[] data = "result".getBytes(StandardCharsets.UTF_8);
      ObjectId id = ObjectId.of(data);
      Files.write(store.root().resolve(id.hex()), data);
      store.retain(id);
      store.release(id);
      assertFalse(store.contains(id));
      assertThrows(ObjectStoreException.class, () -> store.retain(id));
    }
  }

  @Test
  void closeRemovesTheFolder() {
    Path root = folder.resolve("s");
    ObjectStore store = ObjectStores.inFolder(root);
    store.put(bytes("x"));
    store.close();
    assertFalse(Files.exists(root));
  }

  @Test
  void malformedIdsAreRejectedWithTheExpectedForm() {
    IllegalArgumentException error =
        assertThrows(IllegalArgumentException.class, () -> ObjectId.parse("../etc/passwd"));
    assertTrue(error.getMessage().contains("64 lowercase hex"));
  }
}
