package dev.bulletin.bridge;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Random;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The store's contract: ids, references, owners, capacity, eviction and atomic visibility. */
class FileObjectStoreTest {

  @TempDir Path folder;

  static ByteBuffer data(int size, int seed) {
    byte[] out = new byte[size];
    new Random(seed).nextBytes(out);
    return ByteBuffer.wrap(out);
  }

  static byte[] array(ByteBuffer buffer) {
    byte[] out = new byte[buffer.remaining()];
    buffer.duplicate().get(out);
    return out;
  }

  static ObjectKey key(String namespace, int n) {
    return ObjectKey.of(namespace, String.format("%032x", n));
  }

  private ObjectStore store(long capacity) {
    return ObjectStores.open(new StoreOptions(folder.resolve("mem"), capacity, null));
  }

  /** Visible object files (no temporaries) under a folder. */
  static List<Path> objectFiles(Path root) throws Exception {
    try (Stream<Path> files = Files.walk(root)) {
      return files.filter(Files::isRegularFile)
          .filter(p -> !p.getFileName().toString().startsWith(".")).toList();
    }
  }

  static List<Path> tempFiles(Path root) throws Exception {
    try (Stream<Path> files = Files.walk(root)) {
      return files.filter(Files::isRegularFile)
          .filter(p -> p.getFileName().toString().startsWith(".tmp-")).toList();
    }
  }

  @Test
  void sameIdSharesOneFileAndCountsReferences() throws Exception {
    try (ObjectStore store = store(1 << 20)) {
      ObjectKey k = key("ada", 1);
      store.put(k, data(100, 1));
      store.put(k, data(100, 1));
      assertEquals(1, store.objectCount());
      assertEquals(2, store.info(k).references());
      assertArrayEquals(array(data(100, 1)), array(store.read(k)));
      assertEquals(store.root().resolve("ada").resolve(k.id().hex()), objectFiles(store.root()).get(0));
      store.release(k);
      store.release(k);
      // Unreferenced objects stay cached (a later call may need them) until room is needed.
      assertTrue(store.contains(k));
      assertEquals(0, store.stats().referenced());
      assertTrue(store.retainIfPresent(k));
      assertEquals(1, store.stats().referenced());
    }
  }

  @Test
  void objectsOfOneOwnerAreNotAnotherOwners() {
    try (ObjectStore store = store(1 << 20)) {
      ObjectKey ada = key("ada", 7);
      ObjectKey bob = key("bob", 7);
      store.put(ada, data(10, 1));
      assertFalse(store.contains(bob));
      assertFalse(store.retainIfPresent(bob));
      assertThrows(ObjectStoreException.class, () -> store.read(bob));
      store.put(bob, data(10, 2));
      assertFalse(java.util.Arrays.equals(array(store.read(ada)), array(store.read(bob))));
    }
  }

  @Test
  void namespacesAreSafeFolderNames() {
    assertEquals("ada", ObjectKey.namespaceOf("ada"));
    String odd = ObjectKey.namespaceOf("../etc");
    assertTrue(odd.startsWith("u-") && !odd.contains("/"), odd);
    assertThrows(IllegalArgumentException.class, () -> ObjectKey.of("..", "0".repeat(32)));
    assertThrows(IllegalArgumentException.class, () -> ObjectKey.of("ada", "XYZ"));
  }

  @Test
  void objectLargerThanCapacityIsRefusedBeforeAnyByteIsWritten() throws Exception {
    try (ObjectStore store = store(1000)) {
      StoreFullException e = assertThrows(StoreFullException.class,
          () -> store.beginUpload(key("ada", 1), 5000));
      assertTrue(e.getMessage().contains("5000 bytes") && e.getMessage().contains("1000 bytes"),
          e.getMessage());
      assertEquals(List.of(), tempFiles(store.root()));
      assertEquals(0, store.stats().memoryBytes());
      store.put(key("ada", 2), data(500, 1)); // and the store keeps working
    }
  }

  @Test
  void leastRecentlyUsedUnreferencedObjectIsEvictedFirst() {
    try (ObjectStore store = store(300)) {
      for (int i = 1; i <= 3; i++) {
        store.put(key("ada", i), data(100, i));
        store.release(key("ada", i));
      }
      store.read(key("ada", 1)); // 2 is now the least recently used
      store.put(key("ada", 4), data(100, 4));
      assertFalse(store.contains(key("ada", 2)));
      assertTrue(store.contains(key("ada", 1)) && store.contains(key("ada", 3)));
      assertEquals(300, store.stats().memoryBytes());
    }
  }

  @Test
  void referencedObjectsAreNeverEvictedWithoutASpillFolder() {
    try (ObjectStore store = store(200)) {
      store.put(key("ada", 1), data(100, 1));
      store.put(key("ada", 2), data(100, 2));
      StoreFullException e = assertThrows(StoreFullException.class,
          () -> store.put(key("ada", 3), data(100, 3)));
      assertTrue(e.getMessage().contains("no spill folder"), e.getMessage());
      assertTrue(store.contains(key("ada", 1)) && store.contains(key("ada", 2)));
      store.release(key("ada", 1));
      store.put(key("ada", 3), data(100, 3)); // room once one is released
    }
  }

  @Test
  void uploadIsInvisibleUntilCommittedAndLeavesNothingWhenAbandoned() throws Exception {
    try (ObjectStore store = store(1 << 20)) {
      ObjectKey k = key("ada", 9);
      ByteBuffer bytes = data(3000, 9);
      ObjectStore.Upload upload = store.beginUpload(k, 3000);
      upload.write(bytes.slice(0, 1000));
      assertFalse(store.contains(k));
      assertEquals(List.of(), objectFiles(store.root()));
      upload.close(); // the client went away
      assertEquals(List.of(), tempFiles(store.root()));
      assertEquals(0, store.stats().memoryBytes());

      try (ObjectStore.Upload again = store.beginUpload(k, 3000)) {
        again.write(bytes.slice(0, 2000));
        assertThrows(ObjectStoreException.class, again::commit); // short
      }
      assertFalse(store.contains(k));
      try (ObjectStore.Upload whole = store.beginUpload(k, 3000)) {
        whole.write(bytes.slice(0, 1500));
        whole.write(bytes.slice(1500, 1500));
        whole.commit();
      }
      assertArrayEquals(array(bytes), array(store.read(k)));
      assertEquals(3000, store.stats().memoryBytes());
      assertEquals(List.of(), tempFiles(store.root()));
    }
  }

  @Test
  void uploadRefusesMoreBytesThanAnnounced() {
    try (ObjectStore store = store(1 << 20);
        ObjectStore.Upload upload = store.beginUpload(key("ada", 1), 10)) {
      assertThrows(ObjectStoreException.class, () -> upload.write(data(11, 1)));
    }
  }

  @Test
  void adoptPublishesAStagedFileAndDeduplicates() throws Exception {
    try (ObjectStore store = store(1 << 20)) {
      ObjectKey k = key("ada", 5);
      Path staged = store.stagingFolderOf("ada").resolve(".stage-1");
      Files.write(staged, array(data(64, 5)));
      store.adopt(k, staged);
      assertFalse(Files.exists(staged));
      assertArrayEquals(array(data(64, 5)), store.readSmall(k));
      Path again = store.stagingFolderOf("ada").resolve(".stage-2");
      Files.write(again, array(data(64, 5)));
      store.adopt(k, again);
      assertFalse(Files.exists(again));
      assertEquals(2, store.info(k).references());
      assertEquals(64, store.stats().memoryBytes());
      // A writer that saw the object already there wrote nothing: adoption still counts it.
      store.adopt(k, store.stagingFolderOf("ada").resolve(".stage-never-written"));
      assertEquals(3, store.info(k).references());
      assertThrows(ObjectStoreException.class,
          () -> store.adopt(key("ada", 9), store.stagingFolderOf("ada").resolve(".stage-missing")));
      Path elsewhere = store.stagingFolderOf("bob").resolve(".stage-3");
      Files.write(elsewhere, new byte[1]);
      assertThrows(ObjectStoreException.class, () -> store.adopt(key("ada", 6), elsewhere));
    }
  }

  /**
   * The race of a result equal to a stored object (issue 12: 20 clients x 100 no-op calls all
   * returning None): the executor links the stored file as its result, the object is released
   * and its memory reused or evicted before the agent adopts the result. The link keeps the
   * bytes, and a linked file is never handed to another writer to overwrite.
   */
  @Test
  void aResultLinkedToAStoredObjectOutlivesItsReleaseAndIsNeverRecycled() throws Exception {
    try (ObjectStore store = store(3000)) {
      ObjectKey k = key("ada", 7);
      store.put(k, data(2000, 7));
      Path stored = store.folderOf("ada").resolve(k.id().hex());
      Path recycledRace = store.stagingFolderOf("ada").resolve(".result-t1");
      Files.createLink(recycledRace, stored); // what the executor writes for equal bytes
      store.release(k);
      assertFalse(store.stageRecycled("ada", 1500, List.of(k.id()), ".stage-x"));
      assertFalse(Files.exists(store.stagingFolderOf("ada").resolve(".stage-x")));
      assertFalse(store.contains(k));
      store.adopt(k, recycledRace);
      assertArrayEquals(array(data(2000, 7)), store.readSmall(k));

      Path evictedRace = store.stagingFolderOf("ada").resolve(".result-t2");
      Files.createLink(evictedRace, stored);
      store.release(k);
      store.put(key("ada", 8), data(2000, 8)); // evicts the released object
      assertFalse(store.contains(k));
      store.adopt(k, evictedRace);
      assertArrayEquals(array(data(2000, 7)), store.readSmall(k));
    }
  }

  @Test
  void anUnreferencedObjectsFileIsRecycledForAWriterOfTheSameOwner() throws Exception {
    try (ObjectStore store = store(1 << 20)) {
      ObjectKey held = key("ada", 1);
      ObjectKey loose = key("ada", 2);
      ObjectKey preferred = key("ada", 3);
      ObjectKey leased = key("ada", 4);
      store.put(held, data(1000, 1));
      store.put(loose, data(1000, 2));
      store.put(preferred, data(1500, 3));
      store.put(leased, data(1000, 4));
      store.put(key("bob", 5), data(1000, 5));
      for (ObjectKey k : List.of(loose, preferred, leased, key("bob", 5))) {
        store.release(k);
      }
      try (ObjectStore.Lease lease = store.lease(List.of(leased))) {
        // The writer's own mapping wins over a closer fit; held and leased objects never go.
        assertTrue(store.stageRecycled("ada", 900, List.of(preferred.id(), held.id()), ".stage-a"));
        assertFalse(store.contains(preferred));
        Path staged = store.stagingFolderOf("ada").resolve(".stage-a");
        assertEquals(1500, Files.size(staged)); // as it was: the writer truncates it
        assertEquals(5500 - 1500, store.stats().memoryBytes()); // a staged file is not counted
        // A writer with a spare of its own takes only a file it maps: none of these.
        assertFalse(store.stageRecycled("ada", 900, List.of(held.id()), true, ".stage-s"));
        assertTrue(store.contains(loose));
        // Next: the closest fit of what is left, then nothing (bob's objects are bob's).
        assertTrue(store.stageRecycled("ada", 900, List.of(), ".stage-b"));
        assertFalse(store.contains(loose));
        assertFalse(store.stageRecycled("ada", 900, List.of(), ".stage-c"));
        assertTrue(store.contains(held) && store.contains(leased) && store.contains(key("bob", 5)));
        // A staged file is adopted as any other: the writer overwrote it whole.
        Files.write(staged, array(data(900, 9)));
        store.adopt(key("ada", 9), staged);
        assertArrayEquals(array(data(900, 9)), store.readSmall(key("ada", 9)));
      }
      // Too small, or more than twice the size (worth keeping as a cache): not reused.
      store.release(key("ada", 9));
      assertFalse(store.stageRecycled("ada", 1001, List.of(), ".stage-d"));
      assertFalse(store.stageRecycled("ada", 400, List.of(), ".stage-e"));
      assertThrows(ObjectStoreException.class,
          () -> store.stageRecycled("ada", 10, List.of(), "../escape"));
    }
  }

  @Test
  void smallObjectsAreServedFromMemoryAsCopiesAndGoWithTheirObject() throws Exception {
    try (ObjectStore store = store(1 << 20)) {
      ObjectKey small = key("ada", 1);
      ObjectKey large = key("ada", 2);
      ObjectKey adopted = key("ada", 3);
      ObjectKey recycled = key("ada", 4);
      store.put(small, data(600, 1));
      store.put(large, data(20_000, 2));
      store.put(recycled, data(600, 4));
      Path staged = store.stagingFolderOf("ada").resolve(".stage-a");
      Files.write(staged, array(data(700, 3)));
      store.adopt(adopted, staged);
      assertArrayEquals(array(data(700, 3)), store.readSmall(adopted)); // read once, then kept
      // What a dispatch reads for every call comes from memory, not from its file (taken away
      // here to show it); a large object is read from its file.
      for (Path file : objectFiles(folder.resolve("mem"))) {
        if (!file.getFileName().toString().equals(recycled.id().hex())) {
          Files.delete(file);
        }
      }
      byte[] first = store.readSmall(small);
      assertArrayEquals(array(data(600, 1)), first);
      assertArrayEquals(array(data(700, 3)), store.readSmall(adopted));
      assertThrows(ObjectStoreException.class, () -> store.readSmall(large));
      first[0] ^= 1; // each read is a copy of its own
      assertArrayEquals(array(data(600, 1)), store.readSmall(small));
      // Once an object leaves the store its bytes go with it: the same key stored again reads
      // as what was stored last.
      store.release(recycled);
      assertTrue(store.stageRecycled("ada", 500, List.of(recycled.id()), ".stage-b"));
      assertFalse(store.contains(recycled));
      assertThrows(ObjectStoreException.class, () -> store.readSmall(recycled));
      store.put(recycled, data(600, 5));
      assertArrayEquals(array(data(600, 5)), store.readSmall(recycled));
    }
  }

  @Test
  void aLargeUploadReusesAReleasedObjectsFileUnlessSomeoneStillMapsIt() throws Exception {
    int size = 64 << 20; // uploads this large reuse memory
    try (ObjectStore store = store(1L << 30)) {
      ObjectKey mapped = key("ada", 1);
      ObjectKey loose = key("ada", 2);
      store.put(mapped, ByteBuffer.allocate(size).put(0, (byte) 1));
      store.put(loose, ByteBuffer.allocate(size).put(0, (byte) 2));
      // This process keeps the first mapped, as a client holding a zero-copy array would.
      ByteBuffer kept = store.read(mapped);
      store.release(mapped);
      assertEquals(0, upload(store, key("ada", 3), size, (byte) 3).recycledFiles());
      assertFalse(store.contains(mapped)); // its file went to the upload's temporary, then away
      assertEquals(1, kept.get(0)); // but the mapping still reads what it read
      store.release(loose);
      StoreStats stats = upload(store, key("ada", 4), size, (byte) 4);
      assertEquals(1, stats.recycledFiles());
      assertFalse(store.contains(loose));
      assertEquals(4, store.read(key("ada", 4)).get(size - 1));
      assertEquals(2L * size, stats.memoryBytes()); // the two uploads (the kept mapping is ours)
    }
  }

  @Test
  void anUploadIntoReusedMemoryIsReadStraightFromTheSourceAndLeavesNoMapping() throws Exception {
    int size = (64 << 20) + 12345; // two mapping windows, a short last slice
    byte[] bytes = array(data(size, 5));
    try (ObjectStore store = store(1L << 30)) {
      // Into fresh memory it declines, having read nothing: write() is the faster path there.
      try (ObjectStore.Upload fresh = store.beginUpload(key("ada", 1), size)) {
        CountingChannel source = new CountingChannel(bytes, size);
        assertFalse(fresh.receiveInPlace(source, slice -> { }, Runnable::run));
        assertEquals(0, source.read);
      }
      store.put(key("ada", 2), ByteBuffer.allocate(size + (1 << 20))); // larger: cut to size
      store.release(key("ada", 2));

      ObjectKey k = key("ada", 3);
      byte[] seen = new byte[size];
      int[] seenBytes = {0};
      try (ObjectStore.Upload upload = store.beginUpload(k, size)) {
        assertTrue(upload.receiveInPlace(new CountingChannel(bytes, size), slice -> {
          assertTrue(slice.remaining() <= 1 << 20);
          int n = slice.remaining();
          slice.duplicate().get(seen, seenBytes[0], n);
          seenBytes[0] += n;
        }, command -> new Thread(command).start()));
        // Checked before anything allocates much: a collection would unmap a leaked mapping.
        assertFalse(mappedHere(store.root() + "/ada/.tmp-"),
            "the upload's mapping must be gone when it returns");
        assertEquals(size, upload.written());
        upload.commit();
      }
      assertEquals(1, store.stats().recycledFiles());
      assertArrayEquals(bytes, seen); // each slice was handed over once, in order
      assertArrayEquals(bytes, array(store.read(k)));
    }
  }

  @Test
  void aSourceEndingEarlyLeavesNoObjectNoFileAndNoMapping() throws Exception {
    int size = 64 << 20;
    try (ObjectStore store = store(1L << 30)) {
      store.put(key("ada", 1), ByteBuffer.allocate(size));
      store.release(key("ada", 1));
      ObjectKey k = key("ada", 2);
      try (ObjectStore.Upload upload = store.beginUpload(k, size)) {
        java.io.EOFException cut = assertThrows(java.io.EOFException.class,
            () -> upload.receiveInPlace(new CountingChannel(new byte[size], size / 3),
                slice -> { }, Runnable::run));
        assertTrue(cut.getMessage().contains(size / 3 + " of " + size), cut.getMessage());
        assertThrows(ObjectStoreException.class, upload::commit);
      }
      assertFalse(store.contains(k));
      assertEquals(List.of(), tempFiles(store.root()));
      assertFalse(mappedHere(store.root() + "/ada/.tmp-"), "a failed upload must not stay mapped");
      assertEquals(0, store.stats().memoryBytes());
    }
  }

  /** Whether this process maps a file whose path contains {@code name}. */
  /** Whether this JVM maps a file whose path holds {@code name} (this test's store only). */
  private static boolean mappedHere(String name) throws Exception {
    return Files.readAllLines(Path.of("/proc/self/maps")).stream().anyMatch(l -> l.contains(name));
  }

  /** The first {@code limit} bytes of an array, as a channel that counts what was read. */
  private static final class CountingChannel implements java.nio.channels.ReadableByteChannel {
    private final ByteBuffer left;
    long read;

    CountingChannel(byte[] bytes, int limit) {
      left = ByteBuffer.wrap(bytes, 0, limit);
    }

    @Override
    public int read(ByteBuffer into) {
      if (!left.hasRemaining()) {
        return -1;
      }
      // Short reads, as a socket gives them.
      int n = Math.min(Math.min(into.remaining(), left.remaining()), 300_000);
      into.put(left.slice().limit(n));
      left.position(left.position() + n);
      read += n;
      return n;
    }

    @Override
    public boolean isOpen() {
      return true;
    }

    @Override
    public void close() {}
  }

  private static StoreStats upload(ObjectStore store, ObjectKey key, int size, byte fill)
      throws Exception {
    byte[] chunk = new byte[1 << 20];
    java.util.Arrays.fill(chunk, fill);
    try (ObjectStore.Upload upload = store.beginUpload(key, size)) {
      for (int written = 0; written < size; written += chunk.length) {
        upload.write(ByteBuffer.wrap(chunk));
      }
      upload.commit();
    }
    return store.stats();
  }

  @Test
  void dropUnreferencedRemovesAnOwnersCachedObjectsAndStagedFiles() throws Exception {
    try (ObjectStore store = store(1 << 20)) {
      store.put(key("ada", 1), data(10, 1));
      store.put(key("ada", 2), data(10, 2));
      store.release(key("ada", 2));
      store.put(key("bob", 3), data(10, 3));
      store.release(key("bob", 3));
      Path staged = store.stagingFolderOf("ada").resolve(".stage-s1-x");
      Files.write(staged, new byte[5]);
      store.dropUnreferenced("ada", ".stage-s1-");
      assertTrue(store.contains(key("ada", 1)));
      assertFalse(store.contains(key("ada", 2)));
      assertTrue(store.contains(key("bob", 3)));
      assertFalse(Files.exists(staged));
      assertEquals(20, store.stats().memoryBytes());
    }
  }

  @Test
  void closeRemovesEverythingAndAForeignFolderIsRefused() throws Exception {
    Path root = folder.resolve("mem");
    ObjectStore store = store(1 << 20);
    store.put(key("ada", 1), data(10, 1));
    store.close();
    assertFalse(Files.exists(root));

    Path foreign = Files.createDirectories(folder.resolve("home"));
    Files.writeString(foreign.resolve("thesis.tex"), "precious");
    ObjectStoreException e = assertThrows(ObjectStoreException.class,
        () -> ObjectStores.open(new StoreOptions(foreign, 1000, null)));
    assertTrue(e.getMessage().contains("not empty"), e.getMessage());
    assertTrue(Files.exists(foreign.resolve("thesis.tex")));
  }

  @Test
  void optionsAreValidatedWithTheFieldNamed() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> new StoreOptions(folder, 0, null));
    assertTrue(e.getMessage().contains("capacityBytes"), e.getMessage());
    assertTrue(StoreOptions.withDefaults(folder.resolve("x"), 0, null).capacityBytes() > 0);
  }
}
