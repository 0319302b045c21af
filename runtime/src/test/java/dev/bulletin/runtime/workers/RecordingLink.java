package dev.bulletin.runtime.workers;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.worker.CallListener;
import dev.bulletin.worker.CallOutcome;
import dev.bulletin.worker.CallRequest;
import dev.bulletin.worker.WorkerStatusView;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/** A worker link that records what the directory asks of it (test double at the link seam). */
public final class RecordingLink implements WorkerLink {
  public final List<ObjectKey> sent = new ArrayList<>();
  public final List<ObjectKey> dropped = new ArrayList<>();
  /** Spills the worker was told to forget (their values live elsewhere now). */
  public final List<ObjectKey> forgotten = new ArrayList<>();

  @Override
  public CompletableFuture<CallOutcome> run(CallRequest request, CallListener listener) {
    return new CompletableFuture<>();
  }

  @Override
  public void stop(String taskId, String reason) {}

  @Override
  public WorkerStatusView status() {
    return new WorkerStatusView(0, 0, 0);
  }

  @Override
  public void preempt(String taskId, String reason, Duration grace) {}

  @Override
  public void sendObject(ObjectKey key) {
    sent.add(key);
  }

  @Override
  public void forgetSpill(ObjectKey spill, String why) {
    forgotten.add(spill);
  }

  @Override
  public void dropObjects(String namespace, List<ObjectKey> keys) {
    dropped.addAll(keys);
  }
}
