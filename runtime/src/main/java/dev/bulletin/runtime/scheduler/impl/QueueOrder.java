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
 * re-keyed when it surfaces (lazy update) and the order stays exact.
 *
 * <p>The heads sit in two levels: a heap of users per group (the group's charge is the same for
 * all of them, so it is left out there) and a heap of groups, each keyed by its best user's
 * head. A placement raises one group's charge: with one heap of every user's head, each user of
 * that group went stale at once and surfaced to be re-keyed before the next call came out
 * (make bench-scale, 2,000 users of one group: three quarters of the event loop in this
 * heap). Now one placement re-keys one group and one user: O(log users) a call.
 */
final class QueueOrder {
  static final Comparator<CallRow> WITHIN_USER =
      Comparator.comparingInt((CallRow row) -> -row.qosPriority())
          .thenComparingDouble(row -> -row.boost)
          .thenComparingInt(row -> -row.call.priority())
          .thenComparingLong(row -> row.submittedMillis)
          .thenComparingInt(row -> row.index);

  private final Counters counters;
  private final CallRow[][] runs;
  private final long[][] slotMillis;
  private final int[] next;
  /** Per group id, its users' heads (null until a head of that group comes). */
  private final GroupHeads[] groups;
  private final PriorityQueue<GroupHeads> heap = new PriorityQueue<>(QueueOrder::compare);

  /** A user's next call and the user's charge it was keyed with. */
  private static final class Head {
    final int user;
    CallRow row;
    long slot;
    double userCharge;

    Head(int user) {
      this.user = user;
    }
  }

  /**
   * One group's users' heads, keyed in the group heap by the best of them (its fields as they
   * were when keyed) and the group's charge then.
   */
  private static final class GroupHeads {
    final int group;
    final PriorityQueue<Head> heads = new PriorityQueue<>(QueueOrder::compareInGroup);
    Head best;
    CallRow bestRow;
    long bestSlot;
    double bestUserCharge;
    double groupCharge;
    boolean queued;

    GroupHeads(int group) {
      this.group = group;
    }
  }

  QueueOrder(CallRow[] rows, int userCount, Counters counters) {
    this.counters = counters;
    List<List<CallRow>> byUser = new ArrayList<>(userCount);
    int groupCount = 0;
    for (int u = 0; u < userCount; u++) {
      byUser.add(new ArrayList<>());
    }
    for (CallRow row : rows) {
      byUser.get(row.user).add(row);
      groupCount = Math.max(groupCount, row.group + 1);
    }
    groups = new GroupHeads[groupCount];
    runs = new CallRow[userCount][];
    slotMillis = new long[userCount][];
    next = new int[userCount];
    for (int u = 0; u < userCount; u++) {
      runs[u] = byUser.get(u).toArray(new CallRow[0]);
      Arrays.sort(runs[u], WITHIN_USER);
      slotMillis[u] = slots(runs[u]);
      if (runs[u].length > 0) {
        headInGroup(new Head(u));
      }
    }
    for (GroupHeads group : groups) {
      if (group != null && !group.heads.isEmpty()) {
        enqueue(group);
      }
    }
  }

  /** The next call to consider, or null when every call has been handed out. */
  CallRow next() {
    while (!heap.isEmpty()) {
      GroupHeads group = heap.poll();
      group.queued = false;
      Head head = freshBest(group);
      if (head != group.best || head.row != group.bestRow
          || head.userCharge != group.bestUserCharge
          || counters.groupCharge(group.group) != group.groupCharge) {
        enqueue(group); // stale: keyed again with what it holds now
        continue;
      }
      group.heads.poll();
      CallRow row = head.row;
      next[head.user]++;
      if (next[head.user] < runs[head.user].length) {
        push(head);
      }
      if (!group.heads.isEmpty() && !group.queued) {
        enqueue(group);
      }
      return row;
    }
    return null;
  }

  /** The group's best head, re-keying heads whose user's charge moved since they were keyed. */
  private Head freshBest(GroupHeads group) {
    while (true) {
      Head head = group.heads.peek();
      double userCharge = counters.userCharge(head.user);
      if (userCharge == head.userCharge) {
        return head;
      }
      group.heads.poll();
      head.userCharge = userCharge;
      group.heads.add(head);
    }
  }

  /** Per position of a sorted run, the submit time its band's position stands for. */
  static long[] slots(CallRow[] run) {
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

  /**
   * Puts the user's next call among its group's heads, and keeps the group heap right: a group
   * not in it is queued, one whose best this head now is gets keyed again. (A user's calls may
   * name different groups in a snapshot, so the group is the call's.)
   */
  private void push(Head head) {
    GroupHeads group = headInGroup(head);
    if (!group.queued) {
      enqueue(group);
    } else if (group.heads.peek() == head) {
      heap.remove(group);
      enqueue(group);
    }
  }

  private GroupHeads headInGroup(Head head) {
    head.row = runs[head.user][next[head.user]];
    head.slot = slotMillis[head.user][next[head.user]];
    head.userCharge = counters.userCharge(head.user);
    GroupHeads group = groups[head.row.group];
    if (group == null) {
      group = new GroupHeads(head.row.group);
      groups[head.row.group] = group;
    }
    group.heads.add(head);
    return group;
  }

  /** Keys the group with its best head and charge as they are now, and queues it. */
  private void enqueue(GroupHeads group) {
    group.best = group.heads.peek();
    group.bestRow = group.best.row;
    group.bestSlot = group.best.slot;
    group.bestUserCharge = group.best.userCharge;
    group.groupCharge = counters.groupCharge(group.group);
    group.queued = true;
    heap.add(group);
  }

  private static int compare(GroupHeads a, GroupHeads b) {
    CallRow x = a.bestRow;
    CallRow y = b.bestRow;
    int c = compareClassAndBoost(x, y);
    if (c != 0) {
      return c;
    }
    c = Double.compare(a.groupCharge, b.groupCharge);
    if (c != 0) {
      return c;
    }
    c = Double.compare(a.bestUserCharge, b.bestUserCharge);
    if (c != 0) {
      return c;
    }
    c = Long.compare(a.bestSlot, b.bestSlot);
    return c != 0 ? c : Integer.compare(x.index, y.index);
  }

  /** The keys before the charges: the higher QoS class first, then the larger boost. */
  private static int compareClassAndBoost(CallRow x, CallRow y) {
    int c = Integer.compare(y.qosPriority(), x.qosPriority());
    return c != 0 ? c : Double.compare(y.boost, x.boost);
  }

  /** As {@link #compare}, for heads of one group (whose charge they share). */
  private static int compareInGroup(Head a, Head b) {
    CallRow x = a.row;
    CallRow y = b.row;
    int c = compareClassAndBoost(x, y);
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
