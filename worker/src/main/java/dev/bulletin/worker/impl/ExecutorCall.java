package dev.bulletin.worker.impl;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.worker.CallRequest;
import io.vertx.core.json.JsonObject;
import java.nio.file.Path;

/**
 * One call as an executor receives it: JSON {@code {"task", "function", "args", "refs",
 * "result"}} with paths of store files and {@code refs} mapping each argument object's id to its
 * path. Read in one place on the Python side ({@code bulletin._runtime._executor.Call.from_wire}).
 */
final class ExecutorCall {
  private ExecutorCall() {}

  static String toWire(CallRequest request, ObjectStore.Lease lease, Path resultPath) {
    JsonObject refs = new JsonObject();
    for (ObjectKey ref : request.refs()) {
      refs.put(ref.id().hex(), lease.path(ref).toString());
    }
    return new JsonObject()
        .put("task", request.taskId())
        .put("function", lease.path(request.function()).toString())
        .put("args", lease.path(request.args()).toString())
        .put("refs", refs)
        .put("result", resultPath.toString())
        .encode();
  }
}
