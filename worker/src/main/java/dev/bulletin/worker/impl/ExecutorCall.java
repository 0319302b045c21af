package dev.bulletin.worker.impl;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.worker.CallRequest;
import io.vertx.core.json.JsonObject;
import java.nio.file.Path;

/**
 * One call as an executor receives it: JSON {@code {"task", "function", "args", "refs",
 * "result", "spilled", "dropped", "session"}} with paths of store files, {@code refs} mapping each
 * argument object's id to its path, {@code spilled} each of the user's spilled resident values
 * ({@link ResidentSpills}) to its spill object's path, and {@code session} the client session
 * whose resident values the call keeps. Read in one place on the Python side
 * ({@code bulletin._runtime._wire.Call.from_wire}).
 */
final class ExecutorCall {
  private ExecutorCall() {}

  static String toWire(CallRequest request, ObjectStore.Lease lease, Path resultPath,
      java.util.Map<String, ObjectKey> spilled, java.util.Map<String, String> dropped) {
    JsonObject refs = new JsonObject();
    for (ObjectKey ref : request.refs()) {
      refs.put(ref.id().hex(), lease.path(ref).toString());
    }
    JsonObject spills = new JsonObject();
    spilled.forEach((handle, key) -> spills.put(handle, lease.path(key).toString()));
    return new JsonObject()
        .put("task", request.taskId())
        .put("function", lease.path(request.function()).toString())
        .put("args", lease.path(request.args()).toString())
        .put("refs", refs)
        .put("result", resultPath.toString())
        .put("spilled", spills)
        .put("dropped", new JsonObject(new java.util.HashMap<>(dropped)))
        .put("session", request.session())
        .encode();
  }
}
