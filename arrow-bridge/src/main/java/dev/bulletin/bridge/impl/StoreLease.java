package dev.bulletin.bridge.impl;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

/** Objects held in place for one call; closing it lets them be spilled or evicted again. */
final class StoreLease implements ObjectStore.Lease {
  private final FileObjectStore store;
  private final Map<ObjectKey, Path> paths;
  private boolean closed;

  StoreLease(FileObjectStore store, Map<ObjectKey, Path> paths) {
    this.store = store;
    this.paths = paths;
  }

  @Override
  public List<ObjectKey> keys() {
    return List.copyOf(paths.keySet());
  }

  @Override
  public Path path(ObjectKey key) {
    Path path = paths.get(key);
    if (path == null) {
      throw new IllegalArgumentException("object " + key + " is not part of this lease");
    }
    return path;
  }

  @Override
  public synchronized void close() {
    if (!closed) {
      closed = true;
      store.endLease(paths.keySet());
    }
  }
}
