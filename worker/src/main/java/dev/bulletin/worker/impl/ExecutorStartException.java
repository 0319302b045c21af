package dev.bulletin.worker.impl;

/** An executor could not be started; the message quotes what it printed. */
final class ExecutorStartException extends Exception {
  ExecutorStartException(String message, Throwable cause) {
    super(message, cause);
  }
}
