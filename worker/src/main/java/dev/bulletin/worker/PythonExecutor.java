package dev.bulletin.worker;

/**
 * A warm Python executor, implemented in Python ({@code bulletin._executor}) and called over Py4J.
 * Only identifiers cross this interface; payloads stay in the object store (docs/internals.md).
 */
public interface PythonExecutor {

  /**
   * Runs one call and blocks until it ends.
   *
   * @return {@code "ok <resultId> <size> <runSeconds>"} or {@code "raised <resultId> <size>
   *     <runSeconds>"}; the result object is in the store
   */
  String run(String taskId, String functionId, String argsId);

  /** Answers "pong"; a health check. */
  String ping();
}
