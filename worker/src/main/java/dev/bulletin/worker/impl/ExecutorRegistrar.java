package dev.bulletin.worker.impl;

import dev.bulletin.worker.PythonExecutor;
import java.util.concurrent.CompletableFuture;

/**
 * The Py4J entry point of one executor's gateway: the Python side calls {@link #register} with
 * its executor object and the port of its callback server. Public because Py4J calls it by
 * reflection.
 */
public final class ExecutorRegistrar {
  private final CompletableFuture<Registration> registered = new CompletableFuture<>();

  record Registration(PythonExecutor executor, int callbackPort) {}

  public void register(PythonExecutor executor, int callbackPort) {
    registered.complete(new Registration(executor, callbackPort));
  }

  CompletableFuture<Registration> registered() {
    return registered;
  }
}
