package dev.bulletin.runtime.scheduler.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.protocol.Quantities;
import dev.bulletin.runtime.config.ConfigError;
import dev.bulletin.runtime.config.ConfigException;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

class PolicyYamlTest {

  @Test
  void noSectionsMeansTheNotebookFriendlyDefaults() {
    PolicyConfig config = PolicyYaml.parse("users: []\n");
    assertEquals(PolicyConfig.defaults(), config);
    QosClass interactive = config.qos().get("interactive");
    assertEquals(Duration.ofHours(2), interactive.maxWalltime());
    assertEquals(4, interactive.maxCallsPerUser());
    assertTrue(config.qos().get("scavenger").preemptible());
    assertEquals(Duration.ofDays(7), config.qos().get("batch").maxWalltime());
    assertFalse(config.group("anyone").limitsGpus());
  }

  @Test
  void everySectionParses() {
    PolicyConfig config = PolicyYaml.parse("""
        qos:
          interactive: {max_calls_per_user: 2}
          debug: {priority: 200, max_walltime: 15m, max_calls_per_user: 1}
        groups:
          nlp: {gpus: 8, gpu_hours: 500, period: 7d, weight: 2, lend: 6}
          vision: {gpus: unlimited, borrow: false}
        limits:
          default: {gpus: 16}
          intern: {gpus: 1, calls: 2, max_walltime: 1d, users: [carl, dana]}
        scheduler:
          default_qos: batch
          fair_share_horizon: 30m
          preemption_grace: 1m
          candidates: 4
          max_preemptors_per_pass: 8
          locality_min_bytes: 1000
          credits: {per_idle_gpu_hour: 0.5, max_balance: 100}
          weights: {topology: 5, locality: 1, packing: 0}
        """);
    assertEquals(2, config.qos().get("interactive").maxCallsPerUser());
    assertEquals(100, config.qos().get("interactive").priority());
    assertEquals(new QosClass("debug", 200, Duration.ofMinutes(15), 1, false),
        config.qos().get("debug"));
    assertEquals(new GroupQuota("nlp", 8, 500, Duration.ofDays(7), true, 2, 6),
        config.group("nlp"));
    assertEquals(GroupQuota.UNLIMITED_GPUS, config.group("vision").lend());
    assertFalse(config.group("vision").borrow());
    assertFalse(config.group("vision").limitsGpus());
    assertEquals(16, config.limitFor("ann").maxGpus());
    assertEquals(new UserLimit("intern", 1, 2, Duration.ofDays(1), Set.of("carl", "dana")),
        config.limitFor("dana"));
    assertEquals("batch", config.defaultQos());
    assertEquals(Duration.ofMinutes(30), config.fairShareHorizon());
    assertEquals(Duration.ofMinutes(1), config.preemptionGrace());
    assertEquals(4, config.candidateLimit());
    assertEquals(8, config.maxPreemptorsPerPass());
    assertEquals(new CreditRule(0.5, 100), config.credits());
    assertEquals(new Weights(5, 1, 0, 1000), config.weights());
    assertEquals(java.util.List.of("debug", "interactive", "batch", "scavenger"),
        config.qosNames());
  }

  static Stream<Arguments> errors() {
    return Stream.of(
        Arguments.of("qos: {interactive: {prio: 1}}",
            "qos.interactive: unknown field 'prio' (allowed: priority, max_walltime,"
                + " max_calls_per_user, preemptible)"),
        Arguments.of("qos: {debug: {max_walltime: 1h}}",
            "qos.debug.priority: is required for a new class"),
        Arguments.of("qos: {batch: {max_walltime: 2 weeks}}",
            "qos.batch.max_walltime: '2 weeks' is not a duration; use a number with a unit: 500ms,"
                + " 90s, 10m, 2h, 7d, 1h30m, 1h 30m; or Slurm's [D-]HH:MM[:SS]; or unlimited"),
        Arguments.of("qos: {batch: {priority: high}}",
            "qos.batch.priority: expected an integer, got 'high'"),
        Arguments.of("qos: {batch: {max_calls_per_user: 0}}",
            "qos.batch.max_calls_per_user must be >= 1 or unlimited, got 0"),
        Arguments.of("qos: {batch: {preemptible: maybe}}",
            "qos.batch.preemptible: expected true or false, got 'maybe'"),
        Arguments.of("qos: [interactive]", "qos: expected a mapping of names to settings"),
        Arguments.of("groups: {nlp: {gpus: lots}}",
            "groups.nlp.gpus: expected an integer or unlimited, got 'lots'"),
        Arguments.of("groups: {nlp: {gpus: -1}}", "groups.nlp.gpus must be >= 0, got -1"),
        Arguments.of("groups: {nlp: {gpu_hour: 5}}",
            "groups.nlp: unknown field 'gpu_hour' (allowed: gpus, gpu_hours, period, borrow,"
                + " weight, lend)"),
        Arguments.of("groups: {nlp: {gpus: 4, lend: -1}}", "groups.nlp.lend must be >= 0, got -1"),
        Arguments.of("groups: {nlp: {weight: 0}}", "groups.nlp.weight must be > 0, got 0.0"),
        Arguments.of("limits: {intern: {users: carl}}",
            "limits.intern.users: expected a list, e.g. [carl, dana], got 'carl'"),
        Arguments.of("limits: {default: {users: [carl]}}",
            "limits.default: unknown field 'users' (allowed: gpus, calls, max_walltime)"),
        Arguments.of("limits: {a: {users: [carl]}, b: {users: [carl]}}",
            "limits: user 'carl' is in both 'a' and 'b'; put each user in one profile"),
        Arguments.of("scheduler: {default_qos: turbo}",
            "scheduler.default_qos: 'turbo' is not a qos class (known: interactive, batch,"
                + " scavenger)"),
        Arguments.of("scheduler: {credits: {per_idle_gpu_hours: 1}}",
            "scheduler.credits: unknown field 'per_idle_gpu_hours' (allowed: per_idle_gpu_hour,"
                + " max_balance)"),
        Arguments.of("scheduler: {candidates: 0}", "scheduler.candidates must be >= 1, got 0"),
        Arguments.of("scheduler: {backfill: {min_gpus: whole}}",
            "scheduler.backfill.min_gpus: expected an integer >= 1 or whole-worker, got 'whole'"),
        Arguments.of("scheduler: {backfill: {min_gpus: 0}}",
            "scheduler.backfill.min_gpus: must be >= 1, got 0"),
        Arguments.of("scheduler: 5", "scheduler: expected a mapping"));
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("errors")
  void errorsNameTheFieldAndWhatItAccepts(String yaml, String message) {
    IllegalArgumentException error =
        assertThrows(IllegalArgumentException.class, () -> PolicyYaml.parse(yaml));
    assertTrue(error.getMessage().startsWith(message), error.getMessage());
  }

  @Test
  void durationsTakeUnlimitedAndABareNumberOfSecondsAsBefore() {
    PolicyConfig config = PolicyYaml.parse("""
        qos: {batch: {max_walltime: unlimited}}
        scheduler: {preemption_grace: 45, fair_share_horizon: 1h 30m}
        """);
    assertEquals(Quantities.UNLIMITED, config.qos().get("batch").maxWalltime());
    assertEquals(Duration.ofSeconds(45), config.preemptionGrace());
    assertEquals(Duration.ofMinutes(90), config.fairShareHorizon());
  }

  @Test
  void everyMistakeInThePolicyIsReportedAtOnce() {
    ConfigException error = assertThrows(ConfigException.class, () -> PolicyYaml.parse("""
        qos: {batch: {priority: high}}
        groups: {nlp: {gpus: lots}}
        scheduler: {candidates: 0}
        """));
    // The record's own check (candidates >= 1) waits until the fields read well: two errors.
    assertEquals(List.of("qos.batch.priority: expected an integer, got 'high'",
        "groups.nlp.gpus: expected an integer or unlimited, got 'lots'"),
        error.errors().stream().map(ConfigError::line).toList());
  }

  @Test
  void creditsAccrueForUnusedQuotaUpToTheCapAndNotForGroupsWithoutQuota() {
    CreditRule rule = new CreditRule(0.1, 50);
    GroupQuota nlp = new GroupQuota("nlp", 8, 1000, Duration.ofDays(7), true, 1, 8);
    assertEquals(0.1 * 6 * 10, rule.earn(nlp, 0, 2, Duration.ofHours(10)), 1e-9);
    assertEquals(0, rule.earn(nlp, 0, 8, Duration.ofHours(10)), 1e-9);
    assertEquals(50, rule.earn(nlp, 45, 0, Duration.ofHours(24)), 1e-9);
    assertEquals(7, rule.earn(GroupQuota.unlimited("x"), 7, 0, Duration.ofHours(24)), 1e-9);
  }
}
