package dev.bulletin.runtime.scheduler.impl;

import dev.bulletin.runtime.scheduler.plan.Plan;
import dev.bulletin.runtime.scheduler.plan.WaitCode;
import dev.bulletin.runtime.scheduler.plan.WaitInfo;
import dev.bulletin.protocol.Text;
import dev.bulletin.runtime.scheduler.policy.QosClass;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Optional;

/**
 * Turns the pass's waiting calls into what their owners see: position (in the order the
 * scheduler will consider them), the named reason, an estimated start, and what would run
 * sooner. Runs after every placement of the pass, so "would start now" means on what is still
 * free. A call queued for less than {@link #EXPLAIN_AFTER_MILLIS} is not explained yet (it still
 * counts for the positions of those behind it): most calls start within it, and a burst of
 * thousands would otherwise cost an estimate and a message each, every pass.
 */
final class WaitExplainer {

  static final long EXPLAIN_AFTER_MILLIS = 250;

  List<Plan.Waiting> explain(PassView pass, List<CallRow> waiting, List<Holding> holdings) {
    EtaEstimator eta = null;
    long youngest = pass.now().toEpochMilli() - EXPLAIN_AFTER_MILLIS;
    List<Plan.Waiting> infos = new ArrayList<>();
    int position = 0;
    for (CallRow row : waiting) {
      position++;
      if (row.submittedMillis > youngest) {
        continue;
      }
      if (eta == null) {
        eta = new EtaEstimator(pass, holdings);
      }
      infos.add(new Plan.Waiting(row.id(), new WaitInfo(position, row.waitCode, row.waitReason,
          eta(row, pass, eta), suggestions(row, pass, position))));
    }
    return infos;
  }

  /**
   * When a later pass would tell a waiting call something this one could not: the first
   * unexplained call turns {@link #EXPLAIN_AFTER_MILLIS} old, or a planned reclaim's patience
   * runs out. Empty if neither.
   */
  Optional<Instant> revisitAt(PassView pass, List<CallRow> waiting) {
    long youngest = pass.nowMillis() - EXPLAIN_AFTER_MILLIS;
    long first = Long.MAX_VALUE;
    for (CallRow row : waiting) {
      if (row.submittedMillis > youngest) {
        first = Math.min(first, row.submittedMillis + EXPLAIN_AFTER_MILLIS);
      }
      if (row.reclaimAt != null) {
        first = Math.min(first, row.reclaimAt.toEpochMilli());
      }
    }
    return first == Long.MAX_VALUE ? Optional.empty() : Optional.of(Instant.ofEpochMilli(first));
  }

  private static Optional<Instant> eta(CallRow row, PassView pass, EtaEstimator eta) {
    Optional<Instant> estimate = estimate(row, pass, eta);
    if (row.reservedFrom != null) {
      return Optional.of(estimate.filter(e -> e.isBefore(row.reservedFrom))
          .orElse(row.reservedFrom));
    }
    if (row.reclaimAt != null) {
      Instant reclaimed = row.reclaimAt.plus(pass.policy().preemptionGrace());
      return Optional.of(estimate.filter(e -> e.isBefore(reclaimed)).orElse(reclaimed));
    }
    return estimate;
  }

  private static Optional<Instant> estimate(CallRow row, PassView pass, EtaEstimator eta) {
    return switch (row.waitCode) {
      case CAPACITY, NO_IDLE_CAPACITY, RESERVED -> eta.capacity(row);
      case GROUP_QUOTA -> eta.groupQuota(row);
      case GROUP_GPU_HOURS -> {
        Instant resets = pass.usage().group(row.call.group()).periodEndsAt();
        yield resets.equals(Instant.MAX) ? Optional.empty() : Optional.of(resets);
      }
      case QOS_LIMIT -> eta.qosSlot(row);
      case USER_LIMIT -> eta.userLimit(row);
      case PREEMPTING -> Optional.of(pass.now().plus(pass.policy().preemptionGrace()));
      case NO_WORKERS, WORKER_EXPIRY, STATE_ON_GPU -> Optional.empty();
    };
  }

  private static List<String> suggestions(CallRow row, PassView pass, int position) {
    List<String> out = new ArrayList<>(2);
    WaitCode code = row.waitCode;
    if (code == WaitCode.RESERVED) {
      long before = latestStartOfReservation(pass) - pass.nowMillis();
      if (before > 0) {
        out.add("with a walltime of at most " + Text.duration(Duration.ofMillis(before))
            + " it could use reserved GPUs now");
      }
    }
    if ((code == WaitCode.CAPACITY || code == WaitCode.NO_IDLE_CAPACITY) && row.gpus > 1) {
      int mostFree = pass.index().maxFree();
      if (mostFree >= 1 && mostFree < row.gpus) {
        out.add("with " + Text.count(mostFree, "GPU") + " it would start now");
      }
    }
    if (code == WaitCode.QOS_LIMIT) {
      for (QosClass other : pass.policy().qos().values()) { // highest priority first
        String name = other.name();
        int used = pass.counters().userQosCalls(row.user, pass.qosId(name));
        if (other != row.qos && !other.preemptible() && used < other.maxCallsPerUser()
            && other.maxWalltime().toMillis() >= row.walltimeMillis) {
          out.add("qos " + name + " has room for it (" + used + "/"
              + (other.maxCallsPerUser() == QosClass.UNLIMITED ? "unlimited"
                  : String.valueOf(other.maxCallsPerUser())) + " calls of yours)");
          break;
        }
      }
    }
    if (code == WaitCode.GROUP_QUOTA || code == WaitCode.GROUP_GPU_HOURS) {
      for (QosClass other : pass.policy().qos().values()) {
        if (other.preemptible() && pass.index().maxFree() >= row.gpus
            && other.maxWalltime().toMillis() >= row.walltimeMillis) {
          out.add("qos " + other.name() + " would run it now on idle GPUs, as preemptible");
          break;
        }
      }
    }
    if (code == WaitCode.WORKER_EXPIRY) {
      long longest = longestStay(row, pass);
      if (longest > 0) {
        out.add("with a walltime of at most " + Text.duration(Duration.ofMillis(longest))
            + " it would fit a worker now");
      }
    }
    double credits = pass.counters().groupCredits(row.group);
    if (row.creditsShort) {
      out.add(String.format(Locale.ROOT, "it offers %d credits but group %s has %.0f: it waits"
          + " without the boost", row.call.creditsSpent(), row.call.group(), credits));
    } else if (row.boost == 0 && credits >= 1 && position > 1 && code == WaitCode.CAPACITY) {
      out.add(String.format(Locale.ROOT, "spending credits moves it ahead of %s calls that spend"
          + " none (group %s has %.0f)", row.qos.name(), row.call.group(), credits));
    }
    return out;
  }

  /** The latest start of a reservation on a worker with free GPUs; 0 if none. */
  private static long latestStartOfReservation(PassView pass) {
    ClusterIndex index = pass.index();
    long latest = 0;
    for (int w = 0; w < index.size; w++) {
      Reservations.Reservation reservation = index.reservations.on(w);
      if (reservation != null && index.freeCount[w] > 0) {
        latest = Math.max(latest, reservation.startMillis);
      }
    }
    return latest;
  }

  /** The longest a worker with the call's GPUs free stays up from now; 0 if none. */
  private static long longestStay(CallRow row, PassView pass) {
    ClusterIndex index = pass.index();
    long longest = 0;
    for (int w = 0; w < index.size; w++) {
      if (index.usable[w] && index.freeCount[w] >= row.gpus && index.freeCpus[w] >= row.cpus
          && index.freeMemory[w] >= row.memory) {
        longest = Math.max(longest, index.expiresMillis[w] - pass.nowMillis());
      }
    }
    return longest;
  }
}
