package dev.bulletin.runtime.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;

class ConfigNodeTest {

  private final ConfigErrors errors = new ConfigErrors();

  private ConfigNode read(String yaml) {
    return ConfigNode.root(ConfigYaml.parse(yaml, null), errors);
  }

  private List<String> lines() {
    return errors.list().stream().map(ConfigError::line).toList();
  }

  @Test
  void typedFieldsReadAndAbsentOnesFallBack() {
    ConfigNode root = read("""
        a: {n: 3, x: 1.5, enabled: true, name: gpu, wait: 1h 30m, size: 2GiB, list: [p, q]}
        """);
    ConfigNode a = root.mapping("a").orElseThrow();
    assertEquals(3, a.integer("n", 0, 0));
    assertEquals(1.5, a.number("x", 0));
    assertEquals(true, a.bool("enabled", false));
    assertEquals("gpu", a.name("name", "?"));
    assertEquals(Optional.of(Duration.ofMinutes(90)), a.duration("wait"));
    assertEquals(Optional.of(2L << 30), a.size("size"));
    assertEquals(List.of("p", "q"), a.strings("list", "[p]"));
    assertEquals(7, a.integer("missing", 7, 0));
    assertEquals(Optional.empty(), a.duration("missing"));
    a.rejectUnknown();
    assertEquals(List.of(), lines());
  }

  @Test
  void aWrongTypeNamesTheFullPathAndReadingGoesOn() {
    ConfigNode root = read("""
        pools:
          - name: gpu
            slurm: {walltime: [4h], nodes: two, exclusive: maybe}
          - name: cpu
            slurm: {nodes: 1}
        """);
    List<ConfigNode> pools = root.list("pools", "pools");
    ConfigNode slurm = pools.get(0).mapping("slurm").orElseThrow();
    assertEquals(Optional.empty(), slurm.duration("walltime"));
    assertEquals(1, slurm.integer("nodes", 1, 1));
    assertEquals(false, slurm.bool("exclusive", false));
    assertEquals(1, pools.get(1).mapping("slurm").orElseThrow().integer("nodes", 5, 1));
    assertEquals(List.of(
        "pools[0] (gpu).slurm.walltime: expected a single value, got a list",
        "pools[0] (gpu).slurm.nodes: expected an integer, got 'two'",
        "pools[0] (gpu).slurm.exclusive: expected true or false, got 'maybe'"), lines());
  }

  @Test
  void unknownKeysListTheKeysTheSectionReads() {
    ConfigNode root = read("worker: {gpus: 1, gpu: 2}\n");
    ConfigNode worker = root.mapping("worker").orElseThrow();
    worker.integer("gpus", 0, 0);
    worker.integer("cpus", 1, 1);
    worker.rejectUnknown();
    assertEquals(List.of("worker: unknown field 'gpu' (allowed: gpus, cpus)"), lines());
  }

  @Test
  void requiredFieldsAndWrongShapesAreNamed() {
    ConfigNode root = read("""
        items: {name: x}
        named: [a, b]
        entries: [{name: ''}, 5]
        """);
    assertEquals(List.of(), root.list("items", "items (each '- name: ...')"));
    assertEquals(List.of(), root.named("named"));
    List<ConfigNode> entries = root.list("entries", "entries");
    assertEquals(1, entries.size());
    entries.get(0).requiredString("name", "ada");
    assertEquals(List.of(
        "items: must be a list of items (each '- name: ...'), got a mapping",
        "named: expected a mapping of names to settings, got a list",
        "entries[1]: expected a mapping of fields, got '5'",
        "entries[0].name: is required (for example: ada)"), lines());
  }

  @Test
  void namedEntriesKeepTheirOrderAndPath() {
    ConfigNode root = read("qos: {b: {p: 1}, a: {p: x}}\n");
    List<Map.Entry<String, ConfigNode>> qos = root.named("qos");
    assertEquals(List.of("b", "a"), qos.stream().map(Map.Entry::getKey).toList());
    qos.get(1).getValue().integer("p", 0);
    assertEquals(List.of("qos.a.p: expected an integer, got 'x'"), lines());
  }

  @Test
  void aRecordIsBuiltOnlyFromABlockThatReadWellAndItsErrorGetsThePath() {
    ConfigNode root = read("pools: [{name: gpu, worker: {gpus: 2}}, {name: cpu, worker: {gpus: x}}]\n");
    List<ConfigNode> pools = root.list("pools", "pools");
    ConfigNode good = pools.get(0).mapping("worker").orElseThrow();
    good.integer("gpus", 0, 0);
    Optional<String> built = good.build(() -> {
      throw new IllegalArgumentException("worker.gpus must be even here");
    });
    ConfigNode bad = pools.get(1).mapping("worker").orElseThrow();
    bad.integer("gpus", 0, 0);
    Optional<String> skipped = bad.build(() -> "never asked");
    assertEquals(Optional.empty(), built);
    assertEquals(Optional.empty(), skipped);
    assertEquals(List.of("pools[0] (gpu).worker.gpus must be even here",
        "pools[1] (cpu).worker.gpus: expected an integer, got 'x'"), lines());
  }

  @Test
  void unlimitedAndSecondsWhereThePolicyTakesThem() {
    ConfigNode root = read("a: {n: unlimited, h: unlimited, d: unlimited, s: 30}\n");
    ConfigNode a = root.mapping("a").orElseThrow();
    assertEquals(Integer.MAX_VALUE, a.integerOrUnlimited("n", 1));
    assertEquals(Double.POSITIVE_INFINITY, a.numberOrUnlimited("h", 1));
    assertEquals(dev.bulletin.protocol.Quantities.UNLIMITED, a.durationOrUnlimited("d", Duration.ZERO));
    assertEquals(Duration.ofSeconds(30), a.durationOrUnlimited("s", Duration.ZERO));
    assertEquals(Optional.empty(), a.duration("d"));
    assertEquals(1, errors.count(), lines().toString());
    assertTrue(lines().get(0).startsWith("a.d: 'unlimited' is not a duration"), lines().toString());
  }

  @Test
  void aDocumentThatIsNotYamlOrHasAKeyTwiceIsRefusedWithItsLine() {
    ConfigException notYaml = assertThrows(ConfigException.class,
        () -> ConfigYaml.parse("a: [1, 2\n", "config file x.yaml"));
    assertTrue(notYaml.getMessage().startsWith("config file x.yaml: not valid YAML (line "),
        notYaml.getMessage());
    ConfigException twice = assertThrows(ConfigException.class,
        () -> ConfigYaml.parse("groups: {a: {}}\nqos: {}\ngroups: {b: {}}\n", "config file x.yaml"));
    assertTrue(twice.getMessage().contains("groups"), twice.getMessage());
  }

  @Test
  void oneExceptionListsEveryError() {
    errors.add("a", "first");
    errors.add("b.c", "second");
    ConfigException error = assertThrows(ConfigException.class,
        () -> errors.throwIfAny("config file x.yaml"));
    assertEquals("config file x.yaml: 2 errors:\n  a: first\n  b.c: second", error.getMessage());
    assertEquals(List.of("a", "b.c"), error.errors().stream().map(ConfigError::path).toList());
  }
}
