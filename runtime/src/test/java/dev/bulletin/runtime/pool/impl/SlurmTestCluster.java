package dev.bulletin.runtime.pool.impl;

import static org.junit.jupiter.api.Assertions.fail;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Assumptions;

/**
 * The real one-node Slurm of .ci/slurm: tests call {@link #ensure} first. Brings it up with
 * up.sh when it does not answer; skips (with up.sh's reason) only when it cannot be started
 * here, e.g. without root.
 */
final class SlurmTestCluster {
  private SlurmTestCluster() {}

  static final String PARTITION = "debug";
  static final int GPUS = 4;
  private static String unavailable;
  private static boolean up;

  static synchronized void ensure() {
    if (up) {
      return;
    }
    Assumptions.assumeTrue(unavailable == null, () -> "no Slurm: " + unavailable);
    if (answers()) {
      up = true;
      return;
    }
    Path script = repoRoot().resolve(".ci/slurm/up.sh");
    Commands.Result result = Commands.run(List.of("bash", script.toString()), Map.of(),
        Duration.ofMinutes(10));
    if (result.exitCode() == 3) {
      unavailable = result.said();
      Assumptions.abort("no Slurm: " + unavailable);
    }
    if (!result.ok() || !answers()) {
      fail(".ci/slurm/up.sh failed (exit " + result.exitCode() + "): " + result.stdout() + result.stderr());
    }
    up = true;
  }

  private static boolean answers() {
    try {
      Commands.Result ping = Commands.run(List.of("scontrol", "ping"), Map.of(), Duration.ofSeconds(15));
      Commands.Result info = Commands.run(List.of("sinfo", "--noheader", "--partition=" + PARTITION,
          "--format=%t"), Map.of(), Duration.ofSeconds(15));
      return ping.ok() && ping.stdout().contains("is UP") && info.ok()
          && info.stdout().matches("(?s)\\s*(idle|mix|alloc).*");
    } catch (RuntimeException missingCommands) {
      return false;
    }
  }

  static Path repoRoot() {
    Path dir = Path.of("").toAbsolutePath();
    while (dir != null && !Files.exists(dir.resolve(".ci/slurm/up.sh"))) {
      dir = dir.getParent();
    }
    if (dir == null) {
      fail("cannot find .ci/slurm/up.sh above " + Path.of("").toAbsolutePath());
    }
    return dir;
  }

  /** What squeue says of one job: state and reason, e.g. "PENDING Resources"; "" once gone. */
  static String job(String jobId) {
    Commands.Result r = Commands.run(List.of("squeue", "--noheader", "--jobs=" + jobId,
        "--format=%T %r"), Map.of(), Duration.ofSeconds(15));
    return r.ok() ? r.stdout().strip() : "";
  }

  /** Cancels every job of a test cluster id. */
  static void cancelAll(String clusterId) {
    Commands.Result r = Commands.run(List.of("squeue", "--me", "--noheader", "--format=%i %j"),
        Map.of(), Duration.ofSeconds(15));
    for (String line : r.stdout().split("\n")) {
      String[] f = line.strip().split(" ");
      if (f.length == 2 && f[1].startsWith("bulletin-" + clusterId + "-")) {
        Commands.run(List.of("scancel", f[0]), Map.of(), Duration.ofSeconds(15));
      }
    }
  }
}
