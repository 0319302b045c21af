package dev.bulletin.worker.impl;

import java.nio.file.Path;

/**
 * What an executor process was started with, beyond its GPUs and account: the interpreter (the
 * worker's, the caller's, or a built environment's), its memory limit, and the caller's
 * environment fingerprint it serves. A call runs only on an executor of its own profile; an
 * unowned warm executor (the worker's interpreter, no limit) takes the fingerprint of the first
 * call it runs.
 *
 * @param memoryBytes the executor's memory limit, 0 for none
 * @param fingerprint the caller's environment fingerprint, "" for an unowned warm executor
 * @param gpuFraction the share of its GPU it is capped to (0: whole GPUs); fixed at start, as
 *     an MPS memory limit can only be
 */
record ExecutorProfile(Path python, long memoryBytes, String fingerprint, double gpuFraction) {

  ExecutorProfile(Path python, long memoryBytes, String fingerprint) {
    this(python, memoryBytes, fingerprint, 0);
  }

  /** Whether an executor of this profile may run a call that needs {@code wanted}. */
  boolean serves(ExecutorProfile wanted, boolean unowned) {
    return python.equals(wanted.python) && memoryBytes == wanted.memoryBytes
        && gpuFraction == wanted.gpuFraction
        && (fingerprint.equals(wanted.fingerprint) || unowned && fingerprint.isEmpty());
  }
}
