package dev.bulletin.worker.impl;

import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.RejectedExecutionException;
import java.util.function.Function;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * Ends what a client session kept on this agent (issue 29) when the session ends or releases
 * it: its spilled handles ({@link ResidentSpills#dropSession}), and its values in each of the
 * user's live executors, idle or running a call of another session of theirs (the executor
 * answers beside the call). No call is needed and no executor restarted. Only the named user's
 * spills and executors are touched, so one user's session can never drop another's values.
 */
final class ResidentDrops {

  private static final Logger LOG = Logger.getLogger(ResidentDrops.class.getName());

  private final ExecutorService threads;
  private final ResidentSpills spills;
  private final Function<String, List<ExecutorProcess>> liveOf;

  /** @param liveOf the user's live executors (idle and running) */
  ResidentDrops(ExecutorService threads, ResidentSpills spills,
      Function<String, List<ExecutorProcess>> liveOf) {
    this.threads = threads;
    this.spills = spills;
    this.liveOf = liveOf;
  }

  /**
   * Drops the session's values in the background: the caller may be the runtime's event loop,
   * and asking an executor is a blocking Py4J call. A call without a session ("") kept values
   * that no session's end names. {@code ended}: see {@link ResidentSpills#dropSession}.
   */
  void drop(String owner, String session, boolean ended) {
    if (owner == null || owner.isEmpty() || session == null || session.isEmpty()) {
      return;
    }
    try {
      threads.execute(() -> dropNow(owner, session, ended));
    } catch (RejectedExecutionException closing) {
      // the agent is closing: its executors and their values end with it
    }
  }

  private void dropNow(String owner, String session, boolean ended) {
    int spilled = spills.dropSession(owner, session, ended);
    int live = 0;
    for (ExecutorProcess executor : liveOf.apply(owner)) {
      if (!owner.equals(executor.owner()) || !executor.isAlive() || executor.stopped()) {
        continue;
      }
      try {
        live += executor.dropSession(session);
      } catch (RuntimeException e) {
        // It ended meanwhile (retired, killed): what it kept went with it, or into a spill
        // that recording drops (ResidentSpills remembers the ended session).
        LOG.log(Level.FINE, "executor " + executor.id() + " could not drop the resident values"
            + " of session " + session + ": " + e.getMessage());
      }
    }
    if (spilled + live > 0) {
      int inExecutors = live;
      LOG.info(() -> "dropped " + (spilled + inExecutors) + " resident value(s) of " + owner
          + " kept by session " + session + " (" + spilled + " spilled, " + inExecutors
          + " in executors): " + ResidentSpills.SESSION_ENDED);
    }
  }
}
