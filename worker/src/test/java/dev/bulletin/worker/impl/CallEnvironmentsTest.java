package dev.bulletin.worker.impl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.worker.CallListener;
import dev.bulletin.worker.ExecutorSpec;
import dev.bulletin.worker.GpuInventory;
import dev.bulletin.worker.WorkerOptions;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Which interpreter a call's executor runs, and which it refuses. */
class CallEnvironmentsTest {

  private static final CallListener QUIET = new CallListener() {
    @Override
    public void started(String executorId) {}

    @Override
    public void output(boolean stderr, byte[] data) {}
  };

  @TempDir
  Path folder;

  private static Path python() {
    String configured = System.getenv("BULLETIN_TEST_PYTHON");
    return Path.of(configured != null ? configured : "/usr/bin/python3");
  }

  private CallEnvironments environments() {
    return new CallEnvironments(new WorkerOptions("w", python(), GpuInventory.simulated(0), 1, 0,
        0, 1000, 0, 1000, Map.of()));
  }

  /** prefix/bin/python, a link to the test's interpreter, as a venv has it. */
  private Path venv(String mode) throws Exception {
    Path prefix = Files.createDirectories(folder.resolve("venv"));
    Path bin = Files.createDirectories(prefix.resolve("bin"));
    Files.createDirectories(prefix.resolve("lib/python3/site-packages"));
    Path link = Files.createSymbolicLink(bin.resolve("python"), python().toRealPath());
    Files.setPosixFilePermissions(prefix, PosixFilePermissions.fromString(mode));
    return link;
  }

  private static ExecutorSpec caller(Path python) {
    return new ExecutorSpec(0, python.toString(), "f1", "", List.of());
  }

  @Test
  void theCallersInterpreterRunsWhenNoOtherAccountCanChangeIt() throws Exception {
    Path python = venv("rwxr-xr-x");
    assertEquals(python, environments().resolve(caller(python), null, QUIET).python());
  }

  @Test
  void anInterpreterOthersCanChangeIsRefused() throws Exception {
    Path python = venv("rwxrwxrwx");
    ExecutorStartException refused = assertThrows(ExecutorStartException.class,
        () -> environments().resolve(caller(python), null, QUIET));
    assertTrue(refused.getMessage().contains("is writable by its group or by others"),
        refused.getMessage());
    assertTrue(refused.getMessage().contains(folder.resolve("venv").toString()),
        refused.getMessage());
  }

  @Test
  void anInterpreterMissingHereFallsBackToTheWorkersOwn() throws Exception {
    ExecutorSpec spec = caller(folder.resolve("elsewhere/bin/python"));
    assertEquals(python(), environments().resolve(spec, null, QUIET).python());
  }

  @Test
  void anotherPythonVersionIsAnErrorNamingBothSides() throws Exception {
    ExecutorSpec spec = new ExecutorSpec(0, "/opt/py/bin/python3.99", "", "3.99", List.of());
    ExecutorStartException refused = assertThrows(ExecutorStartException.class,
        () -> environments().resolve(spec, null, QUIET));
    String here = environments().versionOf(python());
    assertTrue(refused.getMessage().contains("made from Python 3.99 (/opt/py/bin/python3.99)")
        && refused.getMessage().contains("is Python " + here), refused.getMessage());
  }

  @Test
  void pipOptionsThatWriteElsewhereAreRefused() {
    for (String option : List.of("--target=/tmp/x", "--prefix", "--user", "--root=/", "-t")) {
      IllegalArgumentException refused = assertThrows(IllegalArgumentException.class,
          () -> new ExecutorSpec(0, "", "", "", List.of(option, "six")));
      assertTrue(refused.getMessage().contains("may not pass the option"), refused.getMessage());
    }
    new ExecutorSpec(0, "", "", "", List.of("--no-index", "--find-links=/w", "six==1.16"));
  }
}
