package dev.bulletin.worker;

import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.worker.impl.LocalWorkerAgent;

/** Factory for worker agents. */
public final class Workers {
  private Workers() {}

  /** An agent whose executors are processes on this host. */
  public static WorkerAgent local(WorkerOptions options, ObjectStore store) {
    return new LocalWorkerAgent(options, store);
  }
}
