package dev.bulletin.runtime.control;

import dev.bulletin.runtime.task.Task;
import java.util.ArrayList;
import java.util.List;

/**
 * Which queued calls a pass that only fills freed slots needs to look at. A pipelined map
 * frees one slot per ending call and ran a pass over each user's first
 * {@link Passes#WINDOW_PER_USER} calls each time: about half of the event loop's CPU per call.
 * When one user's calls make up the window, all of the same shape (demand, QoS, walltime, no
 * priority, no credits), and nothing preemptible runs, a call further back can start only if
 * the ones ahead of it can, so the first few decide the same placements, and their positions
 * are the same as in the full window (with several users, fair share interleaves them, and a
 * small window would tell positions the full one does not: those keep the full one). The full
 * window still runs regularly (explanations, positions) and whenever the small one placed or
 * refused all it held (more may fit).
 */
final class SmallWindow {

  /** Enough for the one or two slots an ending frees. */
  static final int PER_USER = 4;

  private SmallWindow() {}

  /**
   * The first {@code size} calls of {@code window} when it is one user's, uniform, and nothing
   * preemptible runs ({@code preemptibleRuns}: a call placed or running does); otherwise
   * {@code window} itself. {@code size} is more than {@link #PER_USER} while passes place all
   * they look at ({@link Passes}).
   */
  static List<Task> of(List<Task> window, boolean preemptibleRuns, int size) {
    if (window.size() <= size || preemptibleRuns) {
      return window; // preemption plans weigh every waiting call against the victims
    }
    Task first = window.get(0);
    for (Task task : window) {
      if (!sameShape(first, task)) {
        return window;
      }
    }
    return new ArrayList<>(window.subList(0, size));
  }

  /** Calls the scheduler cannot tell apart when deciding whether one of them fits now. */
  static boolean sameShape(Task a, Task b) {
    return b.priority() == 0 && b.credits() == 0 && a.owner().user().equals(b.owner().user())
        && a.owner().group().equals(b.owner().group()) && a.demand().equals(b.demand())
        && a.qos().equals(b.qos()) && a.walltime().equals(b.walltime())
        && a.timeoutSeconds() == b.timeoutSeconds();
  }
}
