package dev.bulletin.runtime.identity;

import dev.bulletin.runtime.identity.impl.FileWorkerRoster;
import java.io.IOException;
import java.nio.file.Path;

/**
 * The workers the cluster CA has issued certificates to, and those revoked. Kept in a file of
 * the runtime's state folder, so a revocation outlives a restart: a certificate is good for
 * its whole lifetime to anyone who checks only the CA's signature, so the runtime must
 * remember whom it no longer accepts.
 */
public interface WorkerRoster {
  /** The roster kept in {@code file} (made, owner-only, on the first change). */
  static WorkerRoster open(Path file) throws IOException {
    return FileWorkerRoster.open(file);
  }

  /** Records that {@code workerId} was issued a join token or a certificate. */
  void issued(String workerId) throws IOException;

  /** Whether {@code workerId} was ever issued one (or revoked). */
  boolean known(String workerId);

  /** Revokes {@code workerId} for good; written before this returns. */
  void revoke(String workerId) throws IOException;

  boolean revoked(String workerId);
}
