package dev.bulletin.worker;

/**
 * A warm Python executor, implemented in Python ({@code bulletin._runtime._executor}) and called
 * over Py4J. Only identifiers cross this interface; payloads stay in the object store
 * (docs/internals.md).
 */
public interface PythonExecutor {

  /**
   * Runs one call and blocks until it ends. Paths are files the executor maps read-only.
   *
   * @param refs the objects the arguments refer to, one {@code "<id> <path>"} per line
   * @param resultPath where to write the encoded result (a staged file the agent then publishes)
   * @return {@code "ok <resultId> <size> <runSeconds>"} or {@code "raised <resultId> <size>
   *     <runSeconds>"}; the result's bytes are in {@code resultPath}
   */
  String run(String taskId, String functionPath, String argsPath, String refs, String resultPath);

  /** Answers "pong"; a health check. */
  String ping();
}
