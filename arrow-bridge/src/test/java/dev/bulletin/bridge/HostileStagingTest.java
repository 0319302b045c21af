package dev.bulletin.bridge;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The store against a user who controls the folder they write into (issue 26): every entry
 * point that takes a name from that folder refuses what is not a plain file of the account,
 * names the object, and goes on serving. With root, the account itself (uid 65534 through
 * {@code setpriv}) tries to swap a published object for a link, and cannot.
 */
class HostileStagingTest {

  @TempDir Path folder;
  Path secret;
  ObjectStore store;

  @BeforeEach
  void setUp() throws Exception {
    secret = Files.writeString(folder.resolve("secret"), "root's secret");
    store = ObjectStores.open(new StoreOptions(folder.resolve("mem"), 64 << 20, null));
  }

  @AfterEach
  void tearDown() {
    store.close();
  }

  static ObjectKey key(int n) {
    return ObjectKey.of("alice", String.format("%032x", n));
  }

  private Path staged(String name) {
    return store.stagingFolderOf("alice").resolve(name);
  }

  private void assertRefused(int n, String name, String kind) {
    UserFolder.RefusedFileException e = assertThrows(UserFolder.RefusedFileException.class,
        () -> store.adopt(key(n), staged(name)));
    assertTrue(e.getMessage().contains(key(n).toString()) && e.getMessage().contains(kind),
        e.getMessage());
    assertFalse(store.contains(key(n)));
  }

  private void assertStillServes() throws Exception {
    Files.writeString(staged(".stage-good"), "fine");
    store.adopt(key(99), staged(".stage-good"));
    assertArrayEquals("fine".getBytes(), store.readSmall(key(99)));
    assertEquals("root's secret", Files.readString(secret));
  }

  @Test
  void adoptRefusesASymbolicLink() throws Exception {
    Files.createSymbolicLink(staged(".stage-link"), secret);
    assertRefused(1, ".stage-link", "a symbolic link");
    assertStillServes();
  }

  @Test
  void adoptRefusesAHardLink() throws Exception {
    Path mine = Files.writeString(staged("mine"), "hers");
    Files.createLink(staged(".stage-hard"), mine);
    assertRefused(2, ".stage-hard", "hard links");
    assertStillServes();
  }

  @Test
  void adoptRefusesAFifoWithoutBlocking() throws Exception {
    UserFolderTest.mkfifo(staged(".stage-fifo"));
    assertTimeoutPreemptively(Duration.ofSeconds(10),
        () -> assertRefused(3, ".stage-fifo", "a FIFO"));
    assertStillServes();
  }

  @Test
  void adoptRefusesAFolder() throws Exception {
    Files.createDirectories(staged(".stage-dir"));
    Files.createSymbolicLink(staged(".stage-dir").resolve("x"), secret);
    assertRefused(4, ".stage-dir", "a folder");
    assertStillServes();
  }

  @Test
  void aRecycledFileReplacesALinkPlantedAtItsNameInsteadOfFollowingIt() throws Exception {
    store.put(key(5), ByteBuffer.wrap(new byte[4096]));
    store.release(key(5));
    Files.createSymbolicLink(staged(".result-t1"), secret);
    assertTrue(store.stageRecycled("alice", 4000, List.of(), ".result-t1"));
    assertFalse(Files.isSymbolicLink(staged(".result-t1")));
    assertEquals(4096, Files.size(staged(".result-t1")));
    assertEquals("root's secret", Files.readString(secret));
  }

  @Test
  void publishedObjectsAreOutOfTheStagingFolder() {
    assertEquals(store.folderOf("alice"), store.stagingFolderOf("alice").getParent());
    assertNotEquals(store.folderOf("alice"), store.stagingFolderOf("alice"));
  }

  @Test
  void theAccountCannotSwapAPublishedObjectForALink() throws Exception {
    Assumptions.assumeTrue(UserFolder.currentUid() == 0, "giving folders away needs root");
    Files.setPosixFilePermissions(folder, PosixFilePermissions.fromString("rwx--x--x"));
    store.put(key(6), ByteBuffer.wrap("alice's object".getBytes()));
    store.giveFolderTo("alice", 65534, 65534);
    Path objects = store.folderOf("alice");
    Path published = objects.resolve(key(6).id().hex());
    assertEquals(0, Files.getAttribute(objects, "unix:uid"), "the store's, not the account's");
    assertEquals("rwx--x--x", PosixFilePermissions.toString(
        Files.getPosixFilePermissions(objects)));
    assertEquals(65534, Files.getAttribute(published, "unix:uid"), "the account reads it");
    assertEquals("rw-------", PosixFilePermissions.toString(
        Files.getPosixFilePermissions(published)));
    assertEquals(65534, Files.getAttribute(store.stagingFolderOf("alice"), "unix:uid"));

    // The account's own attempt, as the account: the kernel says no.
    Process swap = new ProcessBuilder("setpriv", "--reuid=65534", "--regid=65534",
        "--clear-groups", "sh", "-c", "rm -f '" + published + "'; ln -sf '" + secret + "' '"
            + published + "'").redirectErrorStream(true).start();
    String said = new String(swap.getInputStream().readAllBytes());
    assertNotEquals(0, swap.waitFor(), "the swap must fail: " + said);
    assertArrayEquals("alice's object".getBytes(), store.readSmall(key(6)));

    // What the account can write, in its staging folder, is taken only as a file of its own.
    Process write = new ProcessBuilder("setpriv", "--reuid=65534", "--regid=65534",
        "--clear-groups", "sh", "-c", "printf theirs > '" + staged(".stage-a") + "' && ln -s '"
            + secret + "' '" + staged(".stage-b") + "'").redirectErrorStream(true).start();
    assertEquals(0, write.waitFor(), new String(write.getInputStream().readAllBytes()));
    store.adopt(key(7), staged(".stage-a"));
    assertArrayEquals("theirs".getBytes(), store.readSmall(key(7)));
    assertRefused(8, ".stage-b", "a symbolic link");
    Files.writeString(staged(".stage-c"), "root wrote it");
    assertRefused(9, ".stage-c", "owned by uid 0");
  }
}
