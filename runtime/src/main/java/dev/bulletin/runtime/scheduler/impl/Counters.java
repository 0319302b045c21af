package dev.bulletin.runtime.scheduler.impl;

import dev.bulletin.runtime.scheduler.snapshot.Usage;
import dev.bulletin.runtime.scheduler.policy.PolicyConfig;

/**
 * Per-group, per-user and per-user-per-QoS counters, started from the running calls and bumped
 * as the pass places calls: every policy check is an array read, not a scan of the running set.
 * Stages read them; only the pass calls {@link #add}.
 */
final class Counters {
  private final int qosCount;
  /**
   * GPUs of non-preemptible calls: what the concurrent-GPU quota limits. GPU counts are
   * doubles because a share of a GPU counts as its fraction; multiples of 1/8 add up exactly.
   */
  private final double[] groupQuotaGpus;
  /** All GPUs a group holds (fair share between groups). */
  private final double[] groupGpus;
  private final double[] userGpus;
  private final int[] userCalls;
  private final int[] userQosCalls;
  private final double[] groupRecent;
  private final double[] groupHoursThisPeriod;
  private final double[] groupCredits;
  private final double[] groupWeight;
  private final double[] userRecent;
  private final double horizonSeconds;

  /** Counters of nothing running yet; the pass {@link #add}s each running call. */
  Counters(Names users, Names groups, Names qos, PolicyConfig policy, Usage usage) {
    this.qosCount = Math.max(1, qos.size());
    int groupCount = groups.size();
    int userCount = users.size();
    groupQuotaGpus = new double[groupCount];
    groupGpus = new double[groupCount];
    groupRecent = new double[groupCount];
    groupHoursThisPeriod = new double[groupCount];
    groupCredits = new double[groupCount];
    groupWeight = new double[groupCount];
    userGpus = new double[userCount];
    userCalls = new int[userCount];
    userQosCalls = new int[userCount * qosCount];
    userRecent = new double[userCount];
    horizonSeconds = policy.fairShareHorizon().toMillis() / 1000.0;
    for (int g = 0; g < groupCount; g++) {
      String name = groups.name(g);
      Usage.GroupUsage groupUsage = usage.group(name);
      groupRecent[g] = groupUsage.recentGpuSeconds();
      groupHoursThisPeriod[g] = groupUsage.gpuHoursThisPeriod();
      groupCredits[g] = groupUsage.credits();
      groupWeight[g] = policy.group(name).weight();
    }
    for (int u = 0; u < userCount; u++) {
      userRecent[u] = usage.userRecentGpuSeconds(users.name(u));
    }
  }

  /** Counts a placed (or running) call. */
  void add(int user, int group, int qos, double gpus, boolean preemptible) {
    if (!preemptible) {
      groupQuotaGpus[group] += gpus;
    }
    groupGpus[group] += gpus;
    userGpus[user] += gpus;
    userCalls[user]++;
    if (qos >= 0) {
      userQosCalls[user * qosCount + qos]++;
    }
  }

  /** GPUs the group's non-preemptible calls hold: what its concurrent-GPU quota limits. */
  double groupQuotaGpus(int group) {
    return groupQuotaGpus[group];
  }

  double groupHoursThisPeriod(int group) {
    return groupHoursThisPeriod[group];
  }

  double groupCredits(int group) {
    return groupCredits[group];
  }

  /** Every group's credit balance, a copy the pass spends from while it honours offers. */
  double[] groupCreditsCopy() {
    return groupCredits.clone();
  }

  double userGpus(int user) {
    return userGpus[user];
  }

  int userCalls(int user) {
    return userCalls[user];
  }

  int userQosCalls(int user, int qos) {
    return qos < 0 ? 0 : userQosCalls[user * qosCount + qos];
  }

  /** Recent usage plus what is held now, per unit of the group's weight: lower goes first. */
  double groupCharge(int group) {
    return (groupRecent[group] + groupGpus[group] * horizonSeconds) / groupWeight[group];
  }

  double userCharge(int user) {
    return userRecent[user] + userGpus[user] * horizonSeconds;
  }
}
