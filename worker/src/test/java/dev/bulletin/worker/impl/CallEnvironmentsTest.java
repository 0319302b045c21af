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
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Which interpreter a call's executor runs, and which it refuses. */
class CallEnvironmentsTest {

  /** What the worker tells a call, in order. */
  private final List<String> told = new java.util.concurrent.CopyOnWriteArrayList<>();
  private final CallListener listener = new CallListener() {
    @Override
    public void started(String executorId) {
      told.add("started " + executorId);
    }

    @Override
    public void output(boolean stderr, byte[] data) {
      told.add(new String(data, java.nio.charset.StandardCharsets.UTF_8));
    }
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

  /**
   * A real venv of the test's interpreter (made with --without-pip) that shares its packages
   * through a .pth file, with its folder set to {@code mode}.
   */
  private Path venv(String mode) throws Exception {
    Path prefix = folder.resolve("venv");
    Process made = new ProcessBuilder(python().toString(), "-m", "venv", "--without-pip",
        prefix.toString()).inheritIO().start();
    assertTrue(made.waitFor(60, TimeUnit.SECONDS) && made.exitValue() == 0);
    Process sites = new ProcessBuilder(python().toString(), "-c",
        "import site; print(repr(site.getsitepackages()))").start();
    String ours = new String(sites.getInputStream().readAllBytes()).strip();
    assertTrue(sites.waitFor(30, TimeUnit.SECONDS) && sites.exitValue() == 0);
    try (var found = Files.find(prefix, 4, (path, attrs) -> path.endsWith("site-packages"))) {
      Path sitePackages = found.findFirst().orElseThrow();
      Files.writeString(sitePackages.resolve("_test.pth"),
          "import site; list(map(site.addsitedir, " + ours + "))\n");
    }
    Files.setPosixFilePermissions(prefix, PosixFilePermissions.fromString(mode));
    return prefix.resolve("bin/python");
  }

  private static ExecutorSpec caller(Path python) {
    return new ExecutorSpec(0, python.toString(), "f1", "", List.of());
  }

  @Test
  void theCallersInterpreterRunsWhenNoOtherAccountCanChangeIt() throws Exception {
    Path python = venv("rwxr-xr-x");
    assertEquals(python, environments().resolve(caller(python), null, listener).python());
    assertEquals(List.of(), told);
  }

  @Test
  void anInterpreterOthersCanChangeIsRefused() throws Exception {
    Path python = venv("rwxrwxrwx");
    CallEnvironments environments = environments();
    // The call runs in the worker's interpreter instead, and is told why, once.
    assertEquals(python(), environments.resolve(caller(python), null, listener).python());
    assertEquals(python(), environments.resolve(caller(python), null, listener).python());
    assertEquals(2, told.size(), told.toString());
    assertTrue(told.get(1).contains("your interpreter " + python + " is not used on this worker: "
        + folder.resolve("venv") + " is writable by its group or by others"), told.get(1));
  }

  @Test
  void anInterpreterMissingHereFallsBackToTheWorkersOwn() throws Exception {
    ExecutorSpec spec = caller(folder.resolve("elsewhere/bin/python"));
    assertEquals(python(), environments().resolve(spec, null, listener).python());
  }

  @Test
  void anInterpreterWithoutTheBulletinPackageIsNotUsed() throws Exception {
    Path prefix = folder.resolve("bare");
    Process made = new ProcessBuilder(python().toString(), "-m", "venv", "--without-pip",
        prefix.toString()).inheritIO().start();
    assertTrue(made.waitFor(60, TimeUnit.SECONDS) && made.exitValue() == 0);
    Path bare = prefix.resolve("bin/python");
    assertEquals(python(), environments().resolve(caller(bare), null, listener).python());
    assertTrue(told.get(1).contains("cannot run it with the bulletin package"), told.toString());
  }

  @Test
  void anotherPythonVersionIsAnErrorNamingBothSides() throws Exception {
    ExecutorSpec spec = new ExecutorSpec(0, "/opt/py/bin/python3.99", "", "3.99", List.of());
    ExecutorStartException refused = assertThrows(ExecutorStartException.class,
        () -> environments().resolve(spec, null, listener));
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
