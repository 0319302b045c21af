package dev.bulletin.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/** check-config lists the run_as refusals with the file's other mistakes, --python included. */
class CheckConfigRunAsTest {
  @TempDir Path folder;
  final StringWriter out = new StringWriter();
  final StringWriter err = new StringWriter();

  private int check(String yaml, String... options) throws Exception {
    Path file = folder.resolve("bulletin.yaml");
    Files.writeString(file, yaml);
    String[] args = new String[options.length + 1];
    System.arraycopy(options, 0, args, 0, options.length);
    args[options.length] = file.toString();
    return new CommandLine(new CheckConfig()).setOut(new PrintWriter(out))
        .setErr(new PrintWriter(err)).execute(args);
  }

  @Test
  void everyRunAsMistakeIsPrintedWithTheOthers() throws Exception {
    // A venv under a folder only its owner can search, as under /root.
    Files.setPosixFilePermissions(folder, PosixFilePermissions.fromString("rwxr-xr-x"));
    Path home = Files.createDirectories(folder.resolve("home"));
    Path python = home.resolve("python");
    Files.copy(Path.of("/bin/true"), python);
    Files.setPosixFilePermissions(home, PosixFilePermissions.fromString("rwx------"));
    assertEquals(1, check("""
        users:
          - {name: ann, token: ann-token-0123456789, run_as: bt-no-such-account}
          - {name: bob, token: bob-token-0123456789, run_as: daemon}
          - {name: worker, token: worker-token-0123456789}
        """, "--python", python.toString()));
    List<String> lines = err.toString().strip().lines().toList();
    assertTrue(lines.get(0).endsWith(": 3 errors:"), err.toString());
    assertTrue(lines.get(1).startsWith("  users[2] (worker).name: 'worker' is the name of one of"
        + " bulletin's own roles"), err.toString());
    assertTrue(lines.get(2).startsWith("  users[0] (ann).run_as: 'bt-no-such-account' is not an"
        + " account of this machine"), err.toString());
    assertTrue(lines.get(3).startsWith("  users[1] (bob).run_as: 'daemon' is a system account"),
        err.toString());

    // With system accounts allowed, daemon is checked against the interpreter.
    err.getBuffer().setLength(0);
    assertEquals(1, check("""
        allow_system_accounts: true
        users: [{name: bob, token: bob-token-0123456789, run_as: daemon}]
        """, "--python", python.toString()));
    assertTrue(err.toString().contains("users[0] (bob).run_as: 'daemon' cannot run the executors'"
        + " interpreter " + python), err.toString());
    assertTrue(err.toString().contains("the folder " + home + " (mode 0700"), err.toString());

    // Without --python the interpreter is not checked.
    err.getBuffer().setLength(0);
    assertEquals(0, check("""
        allow_system_accounts: true
        users: [{name: bob, token: bob-token-0123456789, run_as: daemon}]
        """));
    assertEquals("ok", out.toString().strip(), err.toString());
  }
}
