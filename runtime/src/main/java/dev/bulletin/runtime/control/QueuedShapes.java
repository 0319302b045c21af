package dev.bulletin.runtime.control;

import dev.bulletin.runtime.scheduler.Demand;
import dev.bulletin.runtime.scheduler.policy.PolicyConfig;
import dev.bulletin.runtime.task.Task;
import dev.bulletin.runtime.task.TaskState;
import dev.bulletin.runtime.task.TaskTable;
import java.time.Duration;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.Map;

/**
 * What each user has queued, by the shape {@link CappedCalls} compares: enough to apply its rules
 * to a user's commonest queue (every call of one shape, in submit order) without reading the
 * calls. A refill pass over 2,000 users of the default class looked at 32 calls of each user
 * one of whose calls moved, to keep the one or two their cap let start, and half of those users
 * were at the cap again (their next call had just been placed): about 17,000 calls read per pass
 * for 500 placed (make bench-scale, 1,000 simulated workers). Kept from the task table's moves.
 * Owned by the control plane's event loop.
 */
final class QueuedShapes implements TaskTable.Listener {

  /**
   * What {@link SmallWindow#sameShape} compares, for a call {@link CappedCalls} may leave out
   * (no credits, no priority, no values kept on a GPU, too small for a backfill reservation).
   */
  private record Shape(String group, Demand demand, String qos, Duration walltime,
      double timeoutSeconds) {}

  /** A call the census does not reason about: it sends its user's calls down the long path. */
  private static final Shape OTHER = new Shape(null, null, null, null, -1);

  /** How many of one user's queued calls have one shape. */
  private static final class Count {
    final Shape shape;
    int calls;

    Count(Shape shape) {
      this.shape = shape;
    }
  }

  /** One user's queued calls, counted by shape. */
  private static final class Census {
    final Map<Shape, Count> shapes = new HashMap<>(2);
    long lastSubmitted = Long.MIN_VALUE;
    /** A call was queued behind a later one (a requeue): the order no longer proves alike. */
    boolean outOfOrder;
    int size;
  }

  private final PolicyConfig policy;
  private final Map<String, Census> byUser = new HashMap<>();
  /**
   * The count each queued call was counted in, so that it is taken out of the same one (and a
   * call that leaves the queue costs no hashing of its shape).
   */
  private final Map<Task, Count> counted = new IdentityHashMap<>();

  QueuedShapes(PolicyConfig policy) {
    this.policy = policy;
  }

  @Override
  public void moved(Task task, TaskState from, TaskState to) {
    if (to == TaskState.QUEUED && from != TaskState.QUEUED) {
      queued(task);
    } else if (from == TaskState.QUEUED && to != TaskState.QUEUED) {
      left(task);
    }
  }

  private void queued(Task task) {
    Shape shape = task.priority() == 0 && CappedCalls.mayLeaveOut(task, policy)
        ? new Shape(task.owner().group(), task.demand(), task.qos(), task.walltime(),
            task.timeoutSeconds())
        : OTHER;
    if (counted.containsKey(task)) {
      return; // counted already (a listener told twice): counts stay right
    }
    Census census = byUser.computeIfAbsent(task.owner().user(), user -> new Census());
    Count count = census.shapes.computeIfAbsent(shape, Count::new);
    count.calls++;
    counted.put(task, count);
    long submitted = task.submittedAt().toEpochMilli();
    census.outOfOrder |= submitted < census.lastSubmitted;
    census.lastSubmitted = Math.max(census.lastSubmitted, submitted);
    census.size++;
  }

  private void left(Task task) {
    Count count = counted.remove(task);
    Census census = count == null ? null : byUser.get(task.owner().user());
    if (census == null) {
      return;
    }
    if (--count.calls <= 0) {
      census.shapes.remove(count.shape);
    }
    if (--census.size == 0) {
      byUser.remove(task.owner().user());
    }
  }

  /**
   * The QoS class of every call {@code user} has queued when all are of one shape that
   * {@link CappedCalls} may leave out, queued in submit order; else null (and null when they
   * have none queued).
   */
  String uniformClass(String user) {
    Census census = byUser.get(user);
    if (census == null || census.outOfOrder || census.shapes.size() != 1) {
      return null;
    }
    Shape shape = census.shapes.keySet().iterator().next();
    return shape == OTHER ? null : shape.qos();
  }

  /**
   * Whether every call {@code user} has queued may be left out and is of a class in which
   * {@code left} says the user may start no more: then a refill pass leaves all of them out.
   */
  boolean allAtCap(String user, java.util.function.ToIntFunction<String> left) {
    Census census = byUser.get(user);
    if (census == null) {
      return false;
    }
    for (Shape shape : census.shapes.keySet()) {
      if (shape == OTHER || left.applyAsInt(shape.qos()) != 0) {
        return false;
      }
    }
    return true;
  }
}
