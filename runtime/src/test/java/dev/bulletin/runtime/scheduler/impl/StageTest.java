package dev.bulletin.runtime.scheduler.impl;

import static dev.bulletin.runtime.scheduler.Builders.GIB;
import static dev.bulletin.runtime.scheduler.Builders.CLOCK;
import static dev.bulletin.runtime.scheduler.Builders.aCall;
import static dev.bulletin.runtime.scheduler.Builders.aRunningCall;
import static dev.bulletin.runtime.scheduler.Builders.aSnapshot;
import static dev.bulletin.runtime.scheduler.Builders.aWorker;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.runtime.scheduler.Builders;
import dev.bulletin.runtime.scheduler.plan.WaitCode;
import java.time.Duration;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/** Each call-level stage alone, table-driven: the call "x" against one stage of the chain. */
class StageTest {

  private static final String INTERNS = """
      limits:
        intern: {gpus: 2, calls: 2, max_walltime: 1d, users: [carl]}
      groups:
        nlp: {gpus: 4, borrow: false}
        vision: {gpus: 4, gpu_hours: 100}
      """;

  private static Arguments row(String name, CallCheck stage, Builders.SnapshotBuilder snapshot,
      Verdict.Kind kind, WaitCode code, String reason) {
    return Arguments.of(name, stage, snapshot, kind, code, reason);
  }

  static Stream<Arguments> cases() {
    Builders.WorkerBuilder eight = aWorker().id("w8").gpus(8);
    return Stream.of(
        row("qos: default class resolves", new QosCheck(),
            aSnapshot().workers(eight).queue(aCall().id("x")), Verdict.Kind.PASS, null, null),
        row("qos: unknown class is never", new QosCheck(),
            aSnapshot().queue(aCall().id("x").qos("fast")), Verdict.Kind.NEVER, null,
            "unknown qos 'fast' (known: interactive, batch, scavenger)"),
        row("qos: walltime at the maximum passes", new QosCheck(),
            aSnapshot().queue(aCall().id("x").walltime(Duration.ofHours(2))),
            Verdict.Kind.PASS, null, null),
        row("qos: batch walltime over 7d is never, with no longer class", new QosCheck(),
            aSnapshot().queue(aCall().id("x").qos("batch").walltime(Duration.ofDays(8))),
            Verdict.Kind.NEVER, null, "walltime 8d is over qos batch's maximum of 7d"),
        row("capacity: fits an idle worker", new CapacityCheck(),
            aSnapshot().workers(eight).queue(aCall().id("x").gpus(8)), Verdict.Kind.PASS,
            null, null),
        row("capacity: memory beyond every worker is never", new CapacityCheck(),
            aSnapshot().workers(aWorker().gpus(2).memoryBytes(64 * GIB))
                .queue(aCall().id("x").memoryBytes(128 * GIB)), Verdict.Kind.NEVER, null,
            "no worker can run a call that asks for 1 GPU, 1 CPU, 128.0 GiB memory: the largest"
                + " worker has 2 GPUs, 64 CPUs, 64.0 GiB memory (1 worker in the cluster)"),
        row("capacity: busy GPUs do not make it never", new CapacityCheck(),
            aSnapshot().workers(aWorker().gpus(2).free()).queue(aCall().id("x").gpus(2)),
            Verdict.Kind.PASS, null, null),
        row("capacity: draining workers do not count", new CapacityCheck(),
            aSnapshot().workers(aWorker().gpus(8).draining(), aWorker().gpus(2))
                .queue(aCall().id("x").gpus(4)), Verdict.Kind.NEVER, null,
            "no worker can run a call that asks for 4 GPUs, 1 CPU: the largest worker has 2 GPUs,"
                + " 64 CPUs, 512.0 GiB memory (1 worker in the cluster)"),
        row("user limit: intern under the cap", new UserLimitCheck(),
            aSnapshot().policy(INTERNS).queue(aCall().id("x").user("carl").gpus(2)),
            Verdict.Kind.PASS, null, null),
        row("user limit: intern asking beyond the profile is never", new UserLimitCheck(),
            aSnapshot().policy(INTERNS).queue(aCall().id("x").user("carl").gpus(3)),
            Verdict.Kind.NEVER, null,
            "user carl may hold at most 2 GPUs (limit profile intern); this call asks for 3"),
        row("user limit: intern walltime beyond the profile is never", new UserLimitCheck(),
            aSnapshot().policy(INTERNS).queue(aCall().id("x").user("carl").qos("batch")
                .walltime(Duration.ofDays(2))), Verdict.Kind.NEVER, null,
            "walltime 2d is over user carl's maximum of 1d (limit profile intern); ask for a"
                + " shorter walltime"),
        row("user limit: intern's default batch walltime (7d) is over the profile",
            new UserLimitCheck(),
            aSnapshot().policy(INTERNS).queue(aCall().id("x").user("carl").qos("batch")),
            Verdict.Kind.NEVER, null, "walltime 7d is over user carl's maximum of 1d"),
        row("user limit: intern at the GPU cap waits", new UserLimitCheck(),
            aSnapshot().policy(INTERNS).running(aRunningCall().user("carl").on("w", 0, 1))
                .queue(aCall().id("x").user("carl")), Verdict.Kind.WAIT, WaitCode.USER_LIMIT,
            "user carl holds 2/2 GPUs (limit profile intern)"),
        row("user limit: intern at the call cap waits", new UserLimitCheck(),
            aSnapshot().policy(INTERNS).running(aRunningCall().user("carl").on("w"),
                aRunningCall().user("carl").on("w")).queue(aCall().id("x").user("carl").gpus(0)),
            Verdict.Kind.WAIT, WaitCode.USER_LIMIT, "user carl runs 2/2 calls (limit profile"
                + " intern)"),
        row("user limit: others have the default (none)", new UserLimitCheck(),
            aSnapshot().policy(INTERNS).running(aRunningCall().user("ann").on("w", 0, 1, 2))
                .queue(aCall().id("x").user("ann").gpus(6)), Verdict.Kind.PASS, null, null),
        row("qos limit: under the per-user cap", new QosLimitCheck(),
            aSnapshot().running(aRunningCall().user("ann").qos("interactive").on("w"))
                .queue(aCall().id("x").user("ann")), Verdict.Kind.PASS, null, null),
        row("qos limit: other users' calls do not count", new QosLimitCheck(),
            aSnapshot().running(aRunningCall().user("bob").qos("interactive").on("w"),
                    aRunningCall().user("bob").qos("interactive").on("w"),
                    aRunningCall().user("bob").qos("interactive").on("w"),
                    aRunningCall().user("bob").qos("interactive").on("w"))
                .queue(aCall().id("x").user("ann")), Verdict.Kind.PASS, null, null),
        row("qos limit: batch is unlimited", new QosLimitCheck(),
            aSnapshot().running(aRunningCall().user("ann").qos("batch").on("w"),
                    aRunningCall().user("ann").qos("batch").on("w"))
                .policy("qos: {interactive: {max_calls_per_user: 1}}")
                .queue(aCall().id("x").user("ann").qos("batch")), Verdict.Kind.PASS, null, null),
        row("qos limit: at the configured cap waits", new QosLimitCheck(),
            aSnapshot().running(aRunningCall().user("ann").qos("interactive").on("w"))
                .policy("qos: {interactive: {max_calls_per_user: 1}}")
                .queue(aCall().id("x").user("ann")), Verdict.Kind.WAIT, WaitCode.QOS_LIMIT,
            "qos interactive: 1/1 concurrent calls for user ann"),
        row("group: under quota", new GroupQuotaCheck(),
            aSnapshot().policy(INTERNS).running(aRunningCall().group("nlp").on("w", 0, 1))
                .queue(aCall().id("x").group("nlp").gpus(2)), Verdict.Kind.PASS, null, null),
        row("group: preemptible calls do not count against the quota", new GroupQuotaCheck(),
            aSnapshot().policy(INTERNS)
                .running(aRunningCall().group("nlp").qos("scavenger").preemptible(true)
                    .on("w", 0, 1, 2, 3))
                .queue(aCall().id("x").group("nlp").gpus(4)), Verdict.Kind.PASS, null, null),
        row("group: over quota without borrowing waits", new GroupQuotaCheck(),
            aSnapshot().policy(INTERNS).running(aRunningCall().group("nlp").on("w", 0, 1, 2))
                .queue(aCall().id("x").group("nlp").gpus(2)), Verdict.Kind.WAIT,
            WaitCode.GROUP_QUOTA, "group nlp quota: 3/4 GPUs held, 2 more would exceed it"),
        row("group: bigger than a no-borrow quota is never", new GroupQuotaCheck(),
            aSnapshot().policy(INTERNS).queue(aCall().id("x").group("nlp").gpus(6)),
            Verdict.Kind.NEVER, null, "group nlp's quota is 4 GPUs and it may not borrow"),
        row("group: GPU-hours used up (borrowing allowed) passes as preemptible",
            new GroupQuotaCheck(),
            aSnapshot().policy(INTERNS).groupUsage("vision", 0, 120, 0)
                .queue(aCall().id("x").group("vision")), Verdict.Kind.PASS, null, null),
        row("group: unlisted groups have no quota", new GroupQuotaCheck(),
            aSnapshot().policy(INTERNS).running(aRunningCall().group("bio").on("w", 0, 1, 2, 3))
                .queue(aCall().id("x").group("bio").gpus(8)), Verdict.Kind.PASS, null, null));
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("cases")
  void stage(String name, CallCheck stage, Builders.SnapshotBuilder snapshot, Verdict.Kind kind,
      WaitCode code, String reason) {
    Pass pass = new PolicyScheduler(CLOCK, 1, () -> 0L).pass(snapshot.build());
    CallRow row = pass.row("x");
    Verdict verdict = stage.check(row, pass);
    assertEquals(kind, verdict.kind, String.valueOf(verdict.reason));
    assertEquals(code, verdict.code);
    if (reason != null) {
      assertTrue(verdict.reason.startsWith(reason), verdict.reason);
    }
  }

  @org.junit.jupiter.api.Test
  void borrowingMarksTheCallPreemptibleAndKeepsWhyItIsOverQuota() {
    Pass pass = new PolicyScheduler(CLOCK, 1, () -> 0L).pass(aSnapshot().policy(INTERNS)
        .groupUsage("vision", 0, 120, 0).queue(aCall().id("x").group("vision")).build());
    CallRow row = pass.row("x");
    assertEquals(Verdict.Kind.PASS, new GroupQuotaCheck().check(row, pass).kind);
    assertTrue(row.preemptible);
    assertEquals("group vision used its GPU-hours for this period: 120/100 (resets in 2d)",
        row.borrowReason);
  }
}
