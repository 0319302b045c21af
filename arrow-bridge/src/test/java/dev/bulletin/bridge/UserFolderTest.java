package dev.bulletin.bridge;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * What a user can plant in a folder of theirs where the privileged process expects a file: a
 * symbolic link, a hard link, a FIFO, a folder, another account's file. Each is refused by name
 * and nothing outside the folder is read, changed or given away.
 */
class UserFolderTest {

  @TempDir Path top;
  Path mine;      // the privileged process's own folder (the objects folder)
  Path secret;    // a file the user must not reach (stands for /etc/shadow)
  UserFolder user;

  @BeforeEach
  void setUp() throws IOException {
    mine = Files.createDirectory(top.resolve("objects"));
    secret = Files.writeString(top.resolve("secret"), "root's secret");
    user = UserFolder.of(mine.resolve(".staging"), -1, -1);
  }

  static void mkfifo(Path path) throws Exception {
    Process p = new ProcessBuilder("mkfifo", path.toString()).inheritIO().start();
    assertEquals(0, p.waitFor());
  }

  private UserFolder.RefusedFileException refused(String name) {
    return assertThrows(UserFolder.RefusedFileException.class,
        () -> user.takeFile(name, mine.resolve(".tmp-" + name), "object 42 of alice"));
  }

  @Test
  void aPlainFileOfTheAccountIsTakenWithItsSize() throws Exception {
    Files.writeString(user.path().resolve(".stage-1"), "12345");
    assertEquals(5, user.takeFile(".stage-1", mine.resolve(".tmp-1"), "object 1"));
    assertEquals("12345", Files.readString(mine.resolve(".tmp-1")));
    assertFalse(Files.exists(user.path().resolve(".stage-1")));
  }

  @Test
  void aSymbolicLinkIsRefusedAndItsTargetIsNeitherReadNorMoved() throws Exception {
    Files.createSymbolicLink(user.path().resolve(".stage-link"), secret);
    var e = refused(".stage-link");
    assertTrue(e.getMessage().contains("object 42 of alice") && e.getMessage().contains(
        "a symbolic link"), e.getMessage());
    assertEquals("root's secret", Files.readString(secret));
    assertFalse(Files.exists(mine.resolve(".tmp-.stage-link"), LinkOption.NOFOLLOW_LINKS));
  }

  @Test
  void aHardLinkIsRefusedAndTheOtherNameKeepsItsFile() throws Exception {
    Path other = Files.writeString(user.path().resolve("other"), "hers");
    Files.createLink(user.path().resolve(".stage-hard"), other);
    assertTrue(refused(".stage-hard").getMessage().contains("2 hard links"));
    assertEquals("hers", Files.readString(other));
  }

  @Test
  void aFifoIsRefusedWithoutBlocking() throws Exception {
    mkfifo(user.path().resolve(".stage-fifo"));
    // Opening a FIFO for reading blocks until a writer comes: nothing here may open it.
    assertTimeoutPreemptively(Duration.ofSeconds(10), () -> {
      assertTrue(refused(".stage-fifo").getMessage().contains("a FIFO"));
    });
  }

  @Test
  void aFolderIsRefusedAndDeletedWithoutFollowingTheLinksInside() throws Exception {
    Path planted = Files.createDirectories(user.path().resolve(".stage-dir/deeper"));
    Files.createSymbolicLink(planted.resolve("to-secret"), secret);
    Files.createSymbolicLink(planted.resolve("to-top"), top);
    assertTrue(refused(".stage-dir").getMessage().contains("a folder"));
    assertFalse(Files.exists(mine.resolve(".tmp-.stage-dir"), LinkOption.NOFOLLOW_LINKS));
    assertEquals("root's secret", Files.readString(secret));
    assertTrue(Files.isDirectory(mine));
  }

  @Test
  void anotherAccountsFileIsRefused() throws Exception {
    Assumptions.assumeTrue(UserFolder.currentUid() == 0, "changing a file's owner needs root");
    Path foreign = Files.writeString(user.path().resolve(".stage-foreign"), "nobody's");
    Files.setAttribute(foreign, "unix:uid", 65534);
    assertTrue(refused(".stage-foreign").getMessage().contains("owned by uid 65534"));
  }

  @Test
  void handingInReplacesAPlantedLinkInsteadOfWritingThroughIt() throws Exception {
    Files.createSymbolicLink(user.path().resolve(".result-t1"), secret);
    Path ours = Files.writeString(mine.resolve(".tmp-r"), "result");
    user.handIn(ours, ".result-t1");
    assertFalse(Files.isSymbolicLink(user.path().resolve(".result-t1")));
    assertEquals("result", Files.readString(user.path().resolve(".result-t1")));
    assertEquals("root's secret", Files.readString(secret));
  }

  @Test
  void handingInOntoAPlantedFolderFails() throws Exception {
    Files.createDirectories(user.path().resolve(".result-t2/x"));
    Path ours = Files.writeString(mine.resolve(".tmp-r"), "result");
    assertThrows(IOException.class, () -> user.handIn(ours, ".result-t2"));
  }

  @Test
  void handingInGivesTheFileToTheAccountBeforeItArrives() throws Exception {
    Assumptions.assumeTrue(UserFolder.currentUid() == 0, "changing a file's owner needs root");
    UserFolder nobodys = UserFolder.of(mine.resolve(".staging-nobody"), 65534, 65534);
    Path ours = Files.writeString(mine.resolve(".tmp-r"), "result");
    nobodys.handIn(ours, ".result-t3");
    Path arrived = nobodys.path().resolve(".result-t3");
    assertEquals(65534, Files.getAttribute(arrived, "unix:uid"));
    assertEquals(65534, Files.getAttribute(nobodys.path(), "unix:uid"));
  }

  @Test
  void deletingEntriesRemovesLinksAndFoldersNotWhatTheyPointTo() throws Exception {
    Path outside = Files.createDirectory(top.resolve("outside"));
    Files.writeString(outside.resolve("keep"), "kept");
    Files.createSymbolicLink(user.path().resolve(".stage-s1-link"), outside);
    Path folder = Files.createDirectories(user.path().resolve(".stage-s1-dir"));
    Files.createSymbolicLink(folder.resolve("in"), outside);
    mkfifo(user.path().resolve(".stage-s1-fifo"));
    Files.writeString(user.path().resolve(".stage-s2-other"), "another session's");
    user.deleteEntries(".stage-s1-");
    try (var left = Files.list(user.path())) {
      assertEquals(java.util.List.of(".stage-s2-other"),
          left.map(p -> p.getFileName().toString()).toList());
    }
    assertEquals("kept", Files.readString(outside.resolve("keep")));
  }

  @Test
  void aNameIsOneFileName() {
    assertThrows(IllegalArgumentException.class, () -> user.delete("../secret"));
    assertThrows(IllegalArgumentException.class,
        () -> user.takeFile("..", mine.resolve(".t"), "object"));
    assertTrue(Files.exists(secret));
  }
}
