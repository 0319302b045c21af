package dev.bulletin.runtime.scheduler.impl;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.PriorityQueue;

/**
 * The order calls are considered in: QoS priority, then priority bought with credits, then fair
 * share (the group's recent usage per unit of weight, then the user's inside the group: less
 * first), then submit time. Each user's calls form one sorted run (their own {@code priority}
 * orders them), and a heap holds each user's next call. Fair share is live: placing a call
 * raises its user's and group's charge, so a pass interleaves users instead of serving one
 * burst first. Charges only grow within a pass, so a heap entry whose charges went stale is
 * re-keyed when it surfaces (lazy update) and the order stays exact at O(log users) a call.
 */
final class QueueOrder {
  private static final Comparator<CallRow> WITHIN_USER =
      Comparator.comparingInt((CallRow row) -> -row.qosPriority())
          .thenComparingDouble(row -> -row.boost)
          .thenComparingInt(row -> -row.call.priority())
          .thenComparingLong(row -> row.submittedMillis)
          .thenComparingInt(row -> row.index);

  private final Counters counters;
  private final CallRow[][] runs;
  private final long[][] slotMillis;
  private final int[] next;
  private final PriorityQueue<Head> heap;

  /** A user's next call and the charges it was keyed with. */
  private static final class Head {
    final int user;
    CallRow row;
    long slot;
    double groupCharge;
    double userCharge;

    Head(int user) {
      this.user = user;
    }
  }

  QueueOrder(CallRow[] rows, int userCount, Counters counters) {
    this.counters = counters;
    List<List<CallRow>> byUser = new ArrayList<>(userCount);
    for (int u = 0; u < userCount; u++) {
      byUser.add(new ArrayList<>());
    }
    for (CallRow row : rows) {
      byUser.get(row.user).add(row);
    }
    runs = new CallRow[userCount][];
    slotMillis = new long[userCount][];
    next = new int[userCount];
    heap = new PriorityQueue<>(Math.max(1, userCount), QueueOrder::compare);
    for (int u = 0; u < userCount; u++) {
      runs[u] = byUser.get(u).toArray(new CallRow[0]);
      Arrays.sort(runs[u], WITHIN_USER);
      slotMillis[u] = slots(runs[u]);
      if (runs[u].length > 0) {
        push(new Head(u));
      }
    }
  }

  /** The next call to consider, or null when every call has been handed out. */
  CallRow next() {
    while (!heap.isEmpty()) {
      Head head = heap.poll();
      double groupCharge = counters.groupCharge(head.row.group);
      double userCharge = counters.userCharge(head.user);
      if (groupCharge != head.groupCharge || userCharge != head.userCharge) {
        head.groupCharge = groupCharge;
        head.userCharge = userCharge;
        heap.add(head);
        continue;
      }
      CallRow row = head.row;
      next[head.user]++;
      if (next[head.user] < runs[head.user].length) {
        push(head);
      }
      return row;
    }
    return null;
  }

  /** Per position of a sorted run, the submit time its band's position stands for. */
  private static long[] slots(CallRow[] run) {
    long[] slots = new long[run.length];
    int start = 0;
    while (start < run.length) {
      int end = start;
      while (end < run.length && run[end].qosPriority() == run[start].qosPriority()
          && run[end].boost == run[start].boost) {
        end++;
      }
      for (int i = start; i < end; i++) {
        slots[i] = run[i].submittedMillis;
      }
      Arrays.sort(slots, start, end);
      start = end;
    }
    return slots;
  }

  private void push(Head head) {
    head.row = runs[head.user][next[head.user]];
    head.slot = slotMillis[head.user][next[head.user]];
    head.groupCharge = counters.groupCharge(head.row.group);
    head.userCharge = counters.userCharge(head.user);
    heap.add(head);
  }

  private static int compare(Head a, Head b) {
    CallRow x = a.row;
    CallRow y = b.row;
    int c = Integer.compare(y.qosPriority(), x.qosPriority());
    if (c != 0) {
      return c;
    }
    c = Double.compare(y.boost, x.boost);
    if (c != 0) {
      return c;
    }
    c = Double.compare(a.groupCharge, b.groupCharge);
    if (c != 0) {
      return c;
    }
    c = Double.compare(a.userCharge, b.userCharge);
    if (c != 0) {
      return c;
    }
    c = Long.compare(a.slot, b.slot);
    return c != 0 ? c : Integer.compare(x.index, y.index);
  }
}
