package dev.bulletin.worker.impl;

/**
 * An executor could not load a call, and an earlier call may have damaged its process (a
 * lowered memory limit, a broken import state): the call did not run, and the executor must not
 * run another one. A fresh executor then decides whether the call itself is at fault.
 */
final class UnfitExecutorException extends Exception {
  UnfitExecutorException(String reason) {
    super(reason);
  }
}
