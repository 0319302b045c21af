package dev.bulletin.runtime.pool;

import java.nio.file.Path;
import java.util.Optional;

/**
 * What every provider of one runtime shares.
 *
 * @param clusterId the runtime's cluster id; job names and state files carry it, so a restarted
 *     runtime (same id, see ClusterId) finds its workers and no other cluster's
 * @param headAddress HOST:PORT the workers dial; must be reachable from the worker hosts
 * @param workerToken the token workers register with; passed in the environment, never argv
 * @param python the runtime's interpreter, for pools that name none
 * @param stateDir where providers keep their files (scripts, logs, local pids)
 * @param command the worker command (the real one, or a test's stand-in)
 * @param joinTokens a join token for each worker started, where workers have certificates
 * @param caPem the cluster CA's certificate (PEM) on a TLS runtime, for workers that share no
 *     file system with the head (a Kubernetes Pod gets it from its Secret); empty: plaintext, or
 *     the system's CAs
 */
public record ProviderContext(String clusterId, String headAddress, String workerToken,
    String python, Path stateDir, WorkerCommand command, JoinTokenSource joinTokens,
    Optional<String> caPem) {

  /** A context whose workers attach with the shared worker token. */
  public ProviderContext(String clusterId, String headAddress, String workerToken,
      String python, Path stateDir, WorkerCommand command) {
    this(clusterId, headAddress, workerToken, python, stateDir, command, JoinTokenSource.none());
  }

  public ProviderContext(String clusterId, String headAddress, String workerToken,
      String python, Path stateDir, WorkerCommand command, JoinTokenSource joinTokens) {
    this(clusterId, headAddress, workerToken, python, stateDir, command, joinTokens,
        Optional.empty());
  }

  /** This context, with the CA that workers check the head's certificate against. */
  public ProviderContext withCa(String pem) {
    return new ProviderContext(clusterId, headAddress, workerToken, python, stateDir, command,
        joinTokens, Optional.of(pem));
  }

  public ProviderContext {
    if (clusterId == null || !clusterId.matches("[A-Za-z0-9_-]{1,40}")) {
      throw new IllegalArgumentException("clusterId must be 1..40 letters, digits, '-' or '_', got "
          + clusterId);
    }
    if (headAddress == null || !headAddress.matches(".+:\\d+")) {
      throw new IllegalArgumentException("headAddress must be HOST:PORT, got " + headAddress);
    }
    if (workerToken == null || workerToken.isEmpty() || python == null || stateDir == null
        || command == null || joinTokens == null || caPem == null) {
      throw new IllegalArgumentException("workerToken, python, stateDir, command, joinTokens and"
          + " caPem are required");
    }
  }

  public String pythonFor(PoolConfig pool) {
    return pool.python().orElse(python);
  }

  /** Never prints the token. */
  @Override
  public String toString() {
    return "ProviderContext[cluster=" + clusterId + ", head=" + headAddress + ", python=" + python
        + ", stateDir=" + stateDir + ", command=" + command + "]";
  }
}
