package dev.bulletin.runtime.scheduler.impl;

import dev.bulletin.protocol.Text;

/**
 * Some usable worker of the call's pool could run it if it were idle; else "never". A pool with
 * no usable worker is not "never": a worker may join (the selection stage says so as a wait).
 */
final class CapacityCheck implements CallCheck {
  @Override
  public Verdict check(CallRow row, Pass pass) {
    ClusterIndex index = pass.index;
    if (row.pool == CallRow.UNKNOWN_POOL) {
      return Verdict.PASS;
    }
    ClusterIndex.Shape largest = null;
    for (int p = 0; p < index.poolCount(); p++) {
      if (row.pool != CallRow.ANY_POOL && p != row.pool) {
        continue;
      }
      for (ClusterIndex.Shape shape : index.shapes.get(p)) {
        if (shape.gpus() >= row.gpus && shape.cpus() >= row.cpus - 1e-9
            && shape.memory() >= row.memory) {
          return Verdict.PASS;
        }
        if (largest == null || shape.gpus() > largest.gpus()
            || (shape.gpus() == largest.gpus() && shape.cpus() > largest.cpus())) {
          largest = shape;
        }
      }
    }
    if (largest == null) {
      return Verdict.PASS;
    }
    int workers = index.usableWorkers(row.pool);
    String where = row.pool == CallRow.ANY_POOL ? "" : " in pool '" + row.call.pool() + "'";
    return Verdict.never("no worker" + where + " can run a call that asks for "
        + row.call.demand() + ": the largest has " + Text.count(largest.gpus(), "GPU") + ", "
        + Text.count(largest.cpus(), "CPU") + ", " + Text.bytes(largest.memory()) + " memory ("
        + Text.count(workers, "worker") + ")");
  }
}
