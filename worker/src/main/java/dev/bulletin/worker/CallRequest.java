package dev.bulletin.worker;

import dev.bulletin.bridge.ObjectId;
import java.util.List;

/**
 * One call for a worker to run: the function and arguments are objects already in the worker's
 * store, and the GPUs are the ones the scheduler reserved for it.
 */
public record CallRequest(String taskId, ObjectId function, ObjectId args, List<Integer> gpuIds) {
  public CallRequest {
    gpuIds = List.copyOf(gpuIds);
  }
}
