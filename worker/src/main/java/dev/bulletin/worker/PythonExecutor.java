package dev.bulletin.worker;

/**
 * A warm Python executor, implemented in Python ({@code bulletin._runtime._executor}) and called over
 * Py4J's callback direction only: the agent calls it, it answers, and it holds no credential
 * with which to call the agent. Only identifiers and paths cross this interface; payloads stay
 * in the object store (docs/internals.md, "Runtime/worker → executor").
 */
public interface PythonExecutor {

  /**
   * Runs one call and blocks until it ends.
   *
   * @param call JSON {@code {"task", "function", "args", "refs", "result"}}: paths of store files
   *     the executor maps read-only, {@code refs} mapping argument object ids to paths, and the
   *     path to write the encoded result to (a staged file the agent then publishes)
   * @return a JSON reply: finished, stage (a large result waits for {@link #commit}) or unfit
   */
  String run(String call);

  /**
   * Writes the result the last {@link #run} answered "stage" for.
   *
   * @param staged whether the agent put a recycled file at the result path
   * @return a JSON "finished" reply
   */
  String commit(boolean staged);

  /** Answers "pong"; a health check. */
  String ping();

  /**
   * Writes the values the executor keeps between calls (issue 29) into one object file and
   * frees them; called on an idle executor before it ends.
   *
   * @param path the file to write (a staged file the agent then publishes)
   * @return JSON {@code {"id", "size", "handles"}}, or {@code null} when it keeps nothing
   */
  String spill(String path);

  /**
   * Forgets the values kept for a client session that ended (or released them) and frees their
   * memory; may be called while a call of another session runs.
   *
   * @return JSON {@code {"dropped", "keeps"}}: how many values went, and the bytes still kept
   */
  String dropSession(String session);
}
