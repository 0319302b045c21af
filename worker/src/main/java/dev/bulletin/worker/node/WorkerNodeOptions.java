package dev.bulletin.worker.node;

import dev.bulletin.worker.WorkerOptions;
import java.nio.file.Path;

/**
 * How a worker node attaches: the runtime's address, the cluster's worker token, and the worker
 * it offers. Validated on construction; errors name the field.
 *
 * @param headHost the runtime's host
 * @param headPort the runtime's port
 * @param token the cluster's worker token; empty for a worker that presents its own
 *     certificate (WorkerIdentity)
 * @param pool the pool this worker belongs to; empty for a hand-started worker
 * @param worker the local agent's options (its id is the worker's id)
 * @param hostName this host's name, for status and logs
 * @param expiresAt epoch seconds when this worker's allocation ends; 0 when it does not
 * @param providerHandle what the provider knows the worker by (e.g. "slurm:1234"); may be empty
 * @param storeFolder the local object store
 * @param version the bulletin version, which must match the runtime's
 * @param bulkData whether objects move over the runtime's bulk data port when it has one
 *     (else as gRPC chunks)
 * @param reconnectTimeout how long the worker tries to reattach when its link to the runtime
 *     breaks, its calls running on meanwhile; zero: it stops at once
 * @param storeUserShareBytes each namespace's share of the store, a file system of its own
 *     (needs root; docs/security.md); 0: none
 */
public record WorkerNodeOptions(
    String headHost,
    int headPort,
    String token,
    String pool,
    WorkerOptions worker,
    String hostName,
    double expiresAt,
    String providerHandle,
    Path storeFolder,
    String version,
    boolean bulkData,
    java.time.Duration reconnectTimeout,
    long storeUserShareBytes) {

  public WorkerNodeOptions {
    if (headHost == null || headHost.isBlank()) {
      throw new IllegalArgumentException("--head needs a host, e.g. head-node:8770");
    }
    if (headPort < 1 || headPort > 65535) {
      throw new IllegalArgumentException("--head needs a port 1..65535, got " + headPort);
    }
    token = token == null ? "" : token; // empty: the worker presents its own certificate
    if (!(expiresAt >= 0)) {
      throw new IllegalArgumentException("--expires-at must be epoch seconds >= 0, got "
          + expiresAt);
    }
    if (reconnectTimeout == null || reconnectTimeout.isNegative()) {
      throw new IllegalArgumentException("--reconnect-timeout must be seconds >= 0, got "
          + reconnectTimeout);
    }
    if (storeUserShareBytes < 0) {
      throw new IllegalArgumentException("--store-user-share must be bytes >= 0 (0: none), got "
          + storeUserShareBytes);
    }
    pool = pool == null ? "" : pool;
    providerHandle = providerHandle == null ? "" : providerHandle;
  }

  /** Options whose store holds no user to a share (see {@code storeUserShareBytes}). */
  public WorkerNodeOptions(String headHost, int headPort, String token, String pool,
      WorkerOptions worker, String hostName, double expiresAt, String providerHandle,
      Path storeFolder, String version, boolean bulkData, java.time.Duration reconnectTimeout) {
    this(headHost, headPort, token, pool, worker, hostName, expiresAt, providerHandle,
        storeFolder, version, bulkData, reconnectTimeout, 0);
  }

  /** What a worker with neither a worker token nor a certificate is told. */
  static final String NO_TOKEN = "no worker token: set BULLETIN_WORKER_TOKEN to the cluster's"
      + " worker token (`bulletin up` writes it to ~/.bulletin/worker-token), or, where the"
      + " cluster gives each worker a certificate, join with a join token (BULLETIN_JOIN_TOKEN)";

  public String headAddress() {
    return headHost + ":" + headPort;
  }
}
