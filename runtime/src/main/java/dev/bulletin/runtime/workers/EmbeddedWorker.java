package dev.bulletin.runtime.workers;

import dev.bulletin.runtime.control.ControlPlane;
import dev.bulletin.runtime.scheduler.WorkerSlots;
import dev.bulletin.worker.HostName;
import dev.bulletin.worker.WorkerAgent;
import dev.bulletin.worker.WorkerOptions;
import io.vertx.core.Context;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.logging.Logger;

/**
 * The runtime's own worker (the agent in its process). It is attached at once, so that calls
 * it can run are feasible from the first Submit on, but takes calls only once its warm
 * executors have started: the runtime serves meanwhile (a restart's {@code bulletin up} does
 * not wait for Python processes to start), and calls queue until the executors are ready.
 */
public final class EmbeddedWorker {
  private static final Logger LOG = Logger.getLogger(EmbeddedWorker.class.getName());
  /** Its drain reason, and its state in the status, while its executors start. */
  public static final String STARTING = "its executors are starting";

  private EmbeddedWorker() { }

  /**
   * Attaches the agent's worker to {@code plane} and starts its executors; on {@code context}
   * (the control plane's) it opens for calls once they are ready.
   *
   * @return completes once it takes calls
   */
  public static CompletableFuture<Void> attach(ControlPlane plane, WorkerAgent agent,
      Context context) {
    CompletableFuture<Void> opened = new CompletableFuture<>();
    WorkerOptions options = agent.options();
    WorkerSlots slots = new WorkerSlots(options.workerId(), options.gpus().count(),
        options.gpus().simulated(), options.cpus(), options.memoryBytes());
    AttachedWorker worker = new AttachedWorker(options.workerId(), HostName.get(), "",
        options.gpus().names(), false, 0, "", slots, WorkerLink.embedded(agent),
        options.gpus().topology());
    worker.drain(STARTING);
    // Its spills are in the runtime's store: the directory holds them there (issue 29).
    agent.onSpills(new dev.bulletin.worker.SpillListener() {
      @Override
      public void spilled(dev.bulletin.bridge.ObjectKey spill, long size,
          java.util.Map<String, String> handles) {
        context.runOnContext(ignored -> plane.objects().residents().spilled(worker.id(), false,
            spill, size, "", handles));
      }

      @Override
      public void gone(dev.bulletin.bridge.ObjectKey spill) {
        context.runOnContext(ignored -> plane.objects().residents().gone(worker.id(), spill));
      }
    });
    plane.attach(worker);
    long started = System.nanoTime();
    agent.start().whenComplete((ready, error) -> context.runOnContext(ignored -> {
      if (!STARTING.equals(worker.drainReason())) {
        return; // drained for another reason since (the runtime stops)
      }
      long millis = (System.nanoTime() - started) / 1_000_000;
      if (error == null) {
        LOG.info("embedded worker " + worker.id() + ": executors ready in " + millis + " ms");
      } else {
        // Open anyway: a call starts an executor of its own, and fails saying why if that
        // cannot start either (a broken Python), instead of waiting for nothing.
        Throwable cause = error instanceof CompletionException ? error.getCause() : error;
        LOG.warning("embedded worker " + worker.id() + ": warm executors did not start ("
            + cause.getMessage() + "); calls start their own");
      }
      worker.drain(null);
      plane.workerOpened();
      opened.complete(null);
    }));
    return opened;
  }
}
