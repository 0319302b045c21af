package dev.bulletin.bridge;

import dev.bulletin.bridge.impl.FileObjectStore;
import java.nio.file.Files;
import java.nio.file.Path;

/** Factory for object stores. */
public final class ObjectStores {
  private ObjectStores() {}

  /** A store in {@code folder}, created if needed. Prefer a folder on /dev/shm. */
  public static ObjectStore inFolder(Path folder) {
    return new FileObjectStore(folder);
  }

  /** The default place for a cluster's store: /dev/shm when the host has it, else the temp dir. */
  public static Path defaultFolder(String clusterId) {
    Path shm = Path.of("/dev/shm");
    Path base = Files.isDirectory(shm) && Files.isWritable(shm)
        ? shm
        : Path.of(System.getProperty("java.io.tmpdir"));
    return base.resolve("bulletin-" + clusterId);
  }
}
