package dev.bulletin.worker;

/**
 * Hears a call's progress. Methods are called from the agent's threads, in order: started, then
 * any output, all before the call's outcome completes.
 */
public interface CallListener {

  /** An executor has taken the call. */
  void started(String executorId);

  /** Bytes the call wrote to stdout ({@code stderr == false}) or stderr, as they arrive. */
  void output(boolean stderr, byte[] data);
}
