package dev.bulletin.runtime.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.runtime.config.UnixAccounts.Account;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Whether an account can run an interpreter, told from the modes on the way to it; where the
 * tests run as root, each answer is compared with what the kernel does when the account runs it
 * (setpriv, then a shell's exec).
 */
class InterpreterAccessTest {
  @TempDir Path folder;
  Account daemon;

  @BeforeEach
  void reachableFolder() throws Exception {
    // @TempDir makes a 0700 folder: open it, so that only what a test closes is closed.
    Files.setPosixFilePermissions(folder, PosixFilePermissions.fromString("rwxr-xr-x"));
    daemon = UnixAccounts.lookup("daemon").orElseThrow();
  }

  private Path folder(String name, String mode) throws Exception {
    Path made = Files.createDirectories(folder.resolve(name));
    Files.setPosixFilePermissions(made, PosixFilePermissions.fromString(mode));
    return made;
  }

  private static Path program(Path in, String mode) throws Exception {
    Path python = in.resolve("python");
    Files.copy(Path.of("/bin/true"), python);
    Files.setPosixFilePermissions(python, PosixFilePermissions.fromString(mode));
    return python;
  }

  /** The check's answer, the same as the kernel's where the test can ask it (as root). */
  private Optional<String> blocker(Path python) throws Exception {
    Optional<String> why = InterpreterAccess.blocker(python, daemon);
    if (UnixAccounts.processIsRoot() && Files.isExecutable(Path.of("/usr/bin/setpriv"))) {
      // Through a shell: setpriv's own exec still finds the program with root's rights (it
      // drops them in that exec), the interpreter's every later open would not.
      Process run = new ProcessBuilder("setpriv", "--reuid=daemon", "--regid=daemon",
          "--init-groups", "--", "/bin/sh", "-c", "exec \"$0\"", python.toString())
          .redirectErrorStream(true).start();
      String output = new String(run.getInputStream().readAllBytes());
      assertTrue(run.waitFor(10, TimeUnit.SECONDS));
      assertEquals(why.isEmpty(), run.exitValue() == 0, "check: " + why + "; kernel: exit "
          + run.exitValue() + " " + output);
    }
    return why;
  }

  @Test
  void aProgramInOpenFoldersCanRun() throws Exception {
    assertEquals(Optional.empty(), blocker(program(folder("open", "rwxr-xr-x"), "rwxr-xr-x")));
  }

  @Test
  void aFolderOnlyItsOwnerCanSearchBlocksIt() throws Exception {
    Path closed = folder("closed", "rwxr-xr-x");
    Path python = program(closed, "rwxr-xr-x");
    Files.setPosixFilePermissions(closed, PosixFilePermissions.fromString("rwx------"));
    String why = blocker(python).orElseThrow();
    assertTrue(why.startsWith("the folder " + closed + " (mode 0700, owner "), why);
    assertTrue(why.endsWith("is not searchable by it; install the interpreter (its venv) where"
        + " the account can reach it, e.g. under /opt, or chmod o+x " + closed), why);
  }

  @Test
  void aFolderThatCanBeReadButNotSearchedBlocksIt() throws Exception {
    Path listed = folder("listed", "rwxr-xr-x");
    Path python = program(listed, "rwxr-xr-x");
    Files.setPosixFilePermissions(listed, PosixFilePermissions.fromString("rwxr--r--"));
    assertTrue(blocker(python).orElseThrow().startsWith("the folder " + listed + " (mode 0744"));
  }

  @Test
  void aLinkIsFollowedAndItsTargetsFoldersAreCheckedToo() throws Exception {
    // A venv's bin/python links to the interpreter it was made from: both ways must be open.
    Path closed = folder("closed", "rwxr-xr-x");
    Path real = program(closed, "rwxr-xr-x");
    Files.setPosixFilePermissions(closed, PosixFilePermissions.fromString("rwx------"));
    Path bin = folder("venv/bin", "rwxr-xr-x");
    Path link = Files.createSymbolicLink(bin.resolve("python"), Path.of("../../closed/python"));
    String why = blocker(link).orElseThrow();
    assertTrue(why.startsWith("the folder " + closed + " (mode 0700"), why);

    Path toSystem = Files.createSymbolicLink(bin.resolve("python3"), Path.of("/bin/true"));
    assertEquals(Optional.empty(), blocker(toSystem));
    assertTrue(real.toString().endsWith("closed/python"));
  }

  @Test
  void aProgramOnlyItsOwnerMayRunIsRefused() throws Exception {
    Path python = program(folder("open", "rwxr-xr-x"), "rwxr--r--");
    String why = blocker(python).orElseThrow();
    assertTrue(why.startsWith(python + " (mode 0744, owner "), why);
    assertTrue(why.endsWith(") is not executable by it; chmod o+x " + python
        + " (or install it where the account can run it)"), why);
  }

  @Test
  void theGroupsBitsApplyToTheAccountsGroups() throws Exception {
    Path grouped = folder("grouped", "rwxr-xr-x");
    Path python = program(grouped, "rwxr-xr-x");
    Files.setPosixFilePermissions(grouped, PosixFilePermissions.fromString("rwx--x---"));
    if (UnixAccounts.processIsRoot()) { // only root may give the folder to daemon's group
      Files.setAttribute(grouped, "unix:gid", daemon.gid());
      assertEquals(Optional.empty(), blocker(python));
      Files.setAttribute(grouped, "unix:gid", 0);
    }
    assertTrue(blocker(python).orElseThrow().startsWith("the folder " + grouped));
  }

  @Test
  void aMissingInterpreterIsNamed() throws Exception {
    Path missing = folder.resolve("nowhere/python");
    assertEquals(Optional.of(folder.resolve("nowhere") + " does not exist"),
        InterpreterAccess.blocker(missing, daemon));
  }

  @Test
  void accountsAreLookedUpWithTheirGroupsAndLoginDefsIsRead() throws Exception {
    Account root = UnixAccounts.lookup("root").orElseThrow();
    assertEquals(0, root.uid());
    assertTrue(root.groups().contains(0), root.toString());
    assertEquals(Optional.empty(), UnixAccounts.lookup("bt-no-such-account"));
    Path defs = folder.resolve("login.defs");
    Files.writeString(defs, "# UID_MIN 7\nMAIL_DIR /var/mail\nUID_MIN\t\t 500 # people\n");
    assertEquals(500, UnixAccounts.firstUserUid(defs));
    assertEquals(1000, UnixAccounts.firstUserUid(folder.resolve("absent")));
  }
}
