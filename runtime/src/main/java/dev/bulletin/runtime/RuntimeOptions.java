package dev.bulletin.runtime;

import dev.bulletin.protocol.WireLimits;
import dev.bulletin.runtime.identity.RuntimeConfig;
import dev.bulletin.worker.WorkerOptions;
import java.nio.file.Path;

/**
 * How the runtime runs: where it listens, its state folder, its identity settings and its
 * embedded worker. Immutable and validated on construction.
 *
 * @param home state folder: runtime.json is written there once the runtime serves
 * @param host address to listen on (127.0.0.1 keeps the cluster on this machine)
 * @param port port to listen on; 0 picks a free one
 * @param ownerToken the token of the user who started the cluster
 * @param ownerUser that user's name
 * @param workerToken the cluster's worker token: remote workers attach with it (null: none can)
 * @param config users and (later) pools, QoS and quotas
 * @param worker the embedded worker agent
 * @param storeFolder the node-local object store (null: /dev/shm/bulletin-CLUSTER)
 * @param inlineLimitBytes objects up to this size travel inside control messages
 * @param drainMarginSeconds a worker whose allocation ends within this takes no call without a
 *     timeout
 * @param storeCapacityBytes the store's memory limit (0: half of its file system)
 * @param spillFolder where objects go under memory pressure (null: the temp dir)
 * @param dataPort the bulk data port for cross-host object bytes; 0 picks a free one
 * @param ticketSeconds how long a bulk transfer ticket stays valid
 * @param schedulerSeed the scheduler's randomness (how ties between equal workers break); logged
 *     at start, so a run can be replayed with the same seed
 */
public record RuntimeOptions(
    Path home,
    String host,
    int port,
    String ownerToken,
    String ownerUser,
    String workerToken,
    RuntimeConfig config,
    WorkerOptions worker,
    Path storeFolder,
    long inlineLimitBytes,
    double drainMarginSeconds,
    long storeCapacityBytes,
    Path spillFolder,
    int dataPort,
    double ticketSeconds,
    long schedulerSeed) {

  public static final long MAX_MESSAGE_BYTES = WireLimits.MAX_MESSAGE_BYTES;

  public RuntimeOptions {
    if (port < 0 || port > 65535) {
      throw new IllegalArgumentException("port must be 0..65535, got " + port);
    }
    if (dataPort < 0 || dataPort > 65535) {
      throw new IllegalArgumentException("dataPort must be 0..65535, got " + dataPort);
    }
    if (!(ticketSeconds > 0)) {
      throw new IllegalArgumentException("ticketSeconds must be > 0, got " + ticketSeconds);
    }
    if (inlineLimitBytes < 0 || inlineLimitBytes > MAX_MESSAGE_BYTES / 2) {
      throw new IllegalArgumentException("inlineLimitBytes must be 0.." + MAX_MESSAGE_BYTES / 2
          + ", got " + inlineLimitBytes);
    }
    if (!(drainMarginSeconds >= 0)) {
      throw new IllegalArgumentException("drainMarginSeconds must be >= 0, got "
          + drainMarginSeconds);
    }
    if (storeCapacityBytes < 0) {
      throw new IllegalArgumentException("storeCapacityBytes must be >= 0 (0 = default), got "
          + storeCapacityBytes);
    }
  }
}
