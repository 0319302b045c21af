package dev.bulletin.worker.impl;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.function.Supplier;
import java.util.logging.Logger;

/**
 * Holds a host to {@code --resident-host-bytes} (issue 29): when a call ends and all of this
 * host's executors keep more on their GPUs than that, the idle executors used longest ago spill
 * what they keep to the store ({@link ResidentSpills}), where their users' next calls restore
 * it. The executor whose call just ended is spared: its session is between two cells now. An
 * executor running a call cannot spill; it counts, and waits for its own turn.
 */
final class ResidentHostCap {

  private static final Logger LOG = Logger.getLogger(ResidentHostCap.class.getName());

  private final long capBytes;
  private final ExecutorPool pool;
  private final Supplier<List<ExecutorProcess>> live;

  /** @param live the host's live executors, idle and running */
  ResidentHostCap(long capBytes, ExecutorPool pool, Supplier<List<ExecutorProcess>> live) {
    this.capBytes = capBytes;
    this.pool = pool;
    this.live = live;
  }

  /** Spills idle executors' values, oldest use first, until the host is within its cap. */
  void enforce(ExecutorProcess justUsed) {
    if (capBytes <= 0) {
      return;
    }
    List<ExecutorProcess> executors = live.get();
    long total = executors.stream().mapToLong(ExecutorProcess::keeps).sum();
    List<ExecutorProcess> oldestFirst = new ArrayList<>(executors);
    oldestFirst.removeIf(executor -> executor == justUsed || executor.keeps() == 0);
    oldestFirst.sort(Comparator.comparingLong(ExecutorProcess::idleSinceNanos));
    for (ExecutorProcess executor : oldestFirst) {
      if (total <= capBytes) {
        return;
      }
      // Only an idle one can spill; taken out of the idle set meanwhile, no call takes it.
      if (pool.takeIdle(executor)) {
        long kept = executor.keeps();
        long before = total;
        LOG.info(() -> "this host's executors keep " + before + " bytes on their GPUs, past "
            + "--resident-host-bytes " + capBytes + ": executor " + executor.id()
            + ", idle longest, spills its " + kept);
        pool.spills().spillFrom(executor);
        total -= kept - executor.keeps();
        pool.giveBack(executor);
      }
    }
  }
}
