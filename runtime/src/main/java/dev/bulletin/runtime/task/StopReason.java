package dev.bulletin.runtime.task;

/**
 * Why the control plane stops a call: its caller's side ended it, or it ran out of time. Kept
 * on the {@link Task}, so how the call ends is decided from this type, not from the text a
 * worker echoes back.
 */
public sealed interface StopReason {

  /** Its caller cancelled it. */
  StopReason BY_CALLER = new Cancelled("cancelled by its caller");
  /** Its session ended (the client closed or lost its stream). */
  StopReason CLIENT_GONE = new Cancelled("its client disconnected");

  /** Read after "the call was ": the worker is told it, and the caller reads it. */
  String describe();

  /** Stopped on its caller's behalf; ends as cancelled. */
  record Cancelled(String why) implements StopReason {
    @Override
    public String describe() {
      return why;
    }
  }

  /**
   * It ran past its timeout, or its QoS class's walltime; ends as timed out.
   *
   * @param limit which limit, e.g. "timeout of 5.0 s"
   */
  record TimedOut(String limit) implements StopReason {
    @Override
    public String describe() {
      return "stopped after its " + limit;
    }
  }
}
