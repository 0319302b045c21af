package dev.bulletin.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

class CheckConfigTest {
  @TempDir Path folder;
  final StringWriter out = new StringWriter();
  final StringWriter err = new StringWriter();

  private int check(String yaml) throws Exception {
    Path file = folder.resolve("bulletin.yaml");
    Files.writeString(file, yaml);
    return new CommandLine(new CheckConfig()).setOut(new PrintWriter(out))
        .setErr(new PrintWriter(err)).execute(file.toString());
  }

  @Test
  void aGoodFileIsOk() throws Exception {
    assertEquals(0, check("""
        users: [{name: ann, group: nlp, token: ann-token-0123456789}]
        groups: {nlp: {gpus: 2}}
        pools: [{name: cpu, provider: local, worker: {cpus: 1}, max_workers: 1}]
        """));
    assertEquals("ok", out.toString().strip());
    assertEquals("", err.toString());
  }

  @Test
  void aBadFilePrintsEveryMistakeAndFails() throws Exception {
    assertEquals(1, check("""
        users:
          - {name: ann, token: ann-token-0123456789}
          - {name: ann, token: another-token-0123456789}
        qos: {batch: {max_walltime: forever}}
        pools: {name: gpu}
        """));
    List<String> lines = err.toString().strip().lines().toList();
    assertTrue(lines.get(0).startsWith("config file ") && lines.get(0).endsWith(": 3 errors:"),
        err.toString());
    assertEquals(List.of(
        "  pools: must be a list of pools (each starting with '- name: ...'), got a mapping",
        "  qos.batch.max_walltime: 'forever' is not a duration; use a number with a unit: 500ms,"
            + " 90s, 10m, 2h, 7d, 1h30m, 1h 30m; or Slurm's [D-]HH:MM[:SS]; or unlimited",
        "  users[1] (ann).name: 'ann' has an entry already (users[0] (ann)); give each user one"
            + " entry, with one group and one token"), lines.subList(1, lines.size()));
    assertEquals("", out.toString());
  }
}
