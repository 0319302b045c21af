package dev.bulletin.bridge;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Each namespace held to its share by a file system of its own (issue 26, "the store filled
 * around its capacity check"): what a user writes past the store's back, straight into their
 * staging folder, fills their share and nobody else's. Needs root (mount).
 */
class UserShareTest {

  static final int MIB = 1 << 20;

  @TempDir Path folder;
  ObjectStore store;

  @BeforeEach
  void setUp() {
    Assumptions.assumeTrue(UserFolder.currentUid() == 0, "mounting a share needs root");
    store = ObjectStores.open(new StoreOptions(folder.resolve("mem"), 64L * MIB, null)
        .withUserShare(8L * MIB));
  }

  @AfterEach
  void tearDown() {
    if (store != null) {
      store.close();
    }
  }

  static ObjectKey key(String namespace, int n) {
    return ObjectKey.of(namespace, String.format("%032x", n));
  }

  static boolean mounted(Path path) throws Exception {
    String mounts = Files.readString(Path.of("/proc/self/mountinfo"), StandardCharsets.UTF_8);
    return mounts.contains(" " + path.toAbsolutePath().normalize() + " ");
  }

  /** What the user's own dd does: bytes in their staging folder the store never saw. */
  static void fillBehindTheStoresBack(Path staging) throws Exception {
    Process dd = new ProcessBuilder("dd", "if=/dev/zero", "of=" + staging.resolve("junk"),
        "bs=1M", "count=64").redirectErrorStream(true).start();
    String said = new String(dd.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertFalse(dd.waitFor() == 0, "dd must run out of room: " + said);
    assertTrue(said.contains("No space left"), said);
  }

  @Test
  void aUserWhoFillsTheirShareFillsNobodyElses() throws Exception {
    store.put(key("alice", 1), ByteBuffer.allocate(2 * MIB)); // held
    store.put(key("alice", 2), ByteBuffer.allocate(MIB));
    store.release(key("alice", 2)); // cached, evictable
    fillBehindTheStoresBack(store.stagingFolderOf("alice"));

    // Bob's share is his own: a write of his is as it would be on an empty store.
    store.put(key("bob", 1), ByteBuffer.allocate(4 * MIB));
    assertEquals(4 * MIB, store.size(key("bob", 1)));

    // Alice's write evicts her own cached object first, then fails, saying why.
    StoreFullException full = assertThrows(StoreFullException.class,
        () -> store.put(key("alice", 3), ByteBuffer.allocate(2 * MIB)));
    assertFalse(store.contains(key("alice", 2)), "her cached object went first");
    assertTrue(store.contains(key("alice", 1)), "her held object stays");
    assertTrue(full.getMessage().contains("alice's share") && full.getMessage().contains(
        "8.0 MiB") && full.getMessage().contains(".staging"), full.getMessage());
    assertThrows(StoreFullException.class, () -> store.beginUpload(key("alice", 4), 2 * MIB));

    // Once she frees her folder she writes again.
    Files.delete(store.stagingFolderOf("alice").resolve("junk"));
    store.put(key("alice", 3), ByteBuffer.allocate(2 * MIB));
    assertTrue(store.contains(key("alice", 3)));
  }

  @Test
  void eachNamespaceIsAFileSystemOfItsOwnUntilTheStoreCloses() throws Exception {
    Path alice = store.folderOf("alice");
    assertTrue(mounted(alice));
    assertEquals(8L * MIB, Files.getFileStore(alice).getTotalSpace());
    ObjectStores.keepArena(store, 0.25);
    assertNull(store.arena(), "no host arena: its files cannot be renamed into a share");
    store.close();
    store = null;
    assertFalse(mounted(alice));
    assertFalse(Files.exists(folder.resolve("mem")));
  }

  @Test
  void writersKeepSparesOfTheirOwnInsideTheirShare() {
    assertEquals(0, store.writerSpareBytes("alice"), "no arena budget given: no spares");
    ObjectStores.keepArena(store, 0.25); // 16 MiB of the 64 MiB store
    // Without a host arena a same-host client pre-faults its own spares, in its share: what the
    // arena would offer it (half its budget), at most a quarter of the 8 MiB share.
    assertEquals(2L * MIB, store.writerSpareBytes("alice"));
  }

  @Test
  void aStoreOpenedAgainUnmountsWhatADeadRunLeft() throws Exception {
    Path alice = store.folderOf("alice");
    store = null; // the process "died": nothing closed it
    ObjectStore again = ObjectStores.open(new StoreOptions(folder.resolve("mem"), 64L * MIB,
        null).withUserShare(8L * MIB));
    try {
      assertFalse(mounted(alice), "the dead run's file system was left mounted");
      assertTrue(mounted(again.folderOf("alice")));
    } finally {
      again.close();
    }
  }
}
