package dev.bulletin.worker.impl;

import dev.bulletin.bridge.ObjectId;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.worker.PythonExecutor;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * The Py4J entry point of one executor's gateway: the Python side calls {@link #register} with
 * its executor object and the port of its callback server, and {@link #recycleResultFile}
 * before it writes a large result. Public because Py4J calls it by reflection.
 */
public final class ExecutorRegistrar {
  private final CompletableFuture<Registration> registered = new CompletableFuture<>();
  private final ObjectStore store;

  record Registration(PythonExecutor executor, int callbackPort) {}

  ExecutorRegistrar(ObjectStore store) {
    this.store = store;
  }

  public void register(PythonExecutor executor, int callbackPort) {
    registered.complete(new Registration(executor, callbackPort));
  }

  /**
   * Stages, at the call's result path, the file of a released object of the call owner's, so
   * the executor's write lands in memory already allocated (see ObjectStore#stageRecycled).
   *
   * @param mappedIds space-separated ids whose files the executor still has mapped
   * @return whether the file is there; if not, the executor writes a new one
   */
  public boolean recycleResultFile(String resultPath, long size, String mappedIds) {
    Path path = Path.of(resultPath);
    Path folder = path.getParent();
    if (folder == null || !store.root().equals(folder.getParent())
        || !path.getFileName().toString().startsWith(".result-")) {
      return false; // not a result path this agent handed out
    }
    List<ObjectId> mapped = Arrays.stream(mappedIds.trim().split(" "))
        .filter(id -> !id.isEmpty()).map(ObjectId::parse).toList();
    return store.stageRecycled(folder.getFileName().toString(), size, mapped,
        path.getFileName().toString());
  }

  CompletableFuture<Registration> registered() {
    return registered;
  }
}
