package dev.bulletin.bridge.impl;

import dev.bulletin.bridge.ObjectKey;
import java.nio.file.Path;
import java.util.UUID;

/**
 * Where a store keeps what: {@code root/namespace/id} in memory, {@code spillRoot/namespace/id}
 * on disk, dot-prefixed temporaries next to the objects they become.
 */
record StoreLayout(Path root, Path spillRoot) {

  static final String TEMP_PREFIX = ".tmp-";

  Path memoryPath(ObjectKey key) {
    return root.resolve(key.namespace()).resolve(key.id().hex());
  }

  Path spillPath(ObjectKey key) {
    return spillRoot.resolve(key.namespace()).resolve(key.id().hex());
  }

  Path pathOf(StoreTable.Entry entry) {
    return entry.spilled ? spillPath(entry.key) : memoryPath(entry.key);
  }

  /** A temporary in the namespace's memory folder, which must exist. */
  Path tempPath(String namespace) {
    return root.resolve(namespace).resolve(TEMP_PREFIX + UUID.randomUUID());
  }
}
