package dev.bulletin.worker;

/**
 * Bounds on the values users keep between calls (issue 29, docs/notebooks.md): on the GPU in
 * their executors, and spilled to the store when those end.
 *
 * @param idleMillis how long a spilled value is kept unused; then it is dropped, and the next
 *     call that names it is told so
 * @param userResidentBytes how much one user's executor keeps on its GPUs (0: no cap); a value
 *     past it comes back by value, with a line that says so
 * @param userSpilledBytes how much of one user's spilled values this host keeps (0: no cap); the
 *     oldest spill goes first
 * @param hostSpilledBytes the same for all users of this host together (0: no cap)
 * @param hostResidentBytes how much all executors of this host keep on their GPUs together (0:
 *     no cap); past it, the idle executors that were used longest ago spill theirs
 */
public record ResidentLimits(long idleMillis, long userResidentBytes, long userSpilledBytes,
    long hostSpilledBytes, long hostResidentBytes) {

  /** An hour unused, no byte caps (the store's own share per user still bounds spills). */
  public static final ResidentLimits DEFAULT = new ResidentLimits(3_600_000, 0, 0, 0, 0);

  public ResidentLimits {
    if (idleMillis < 1) {
      throw new IllegalArgumentException("resident idleMillis must be >= 1, got " + idleMillis);
    }
    if (userResidentBytes < 0 || userSpilledBytes < 0 || hostSpilledBytes < 0
        || hostResidentBytes < 0) {
      throw new IllegalArgumentException("resident byte caps must be >= 0 (0: no cap), got "
          + userResidentBytes + ", " + userSpilledBytes + ", " + hostSpilledBytes + ", "
          + hostResidentBytes);
    }
  }
}
