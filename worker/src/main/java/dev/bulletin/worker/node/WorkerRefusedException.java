package dev.bulletin.worker.node;

/** The runtime refused the worker, or could not be reached; the message says which and why. */
public final class WorkerRefusedException extends Exception {
  public WorkerRefusedException(String message) {
    super(message);
  }
}
