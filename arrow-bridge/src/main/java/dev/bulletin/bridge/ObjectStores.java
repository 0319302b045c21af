package dev.bulletin.bridge;

import dev.bulletin.bridge.impl.FileObjectStore;
import dev.bulletin.bridge.impl.StoreOwner;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/** Factory for object stores. */
public final class ObjectStores {
  private ObjectStores() {}

  /** A store in {@code folder} with the default capacity and no spill folder. */
  public static ObjectStore inFolder(Path folder) {
    return open(StoreOptions.withDefaults(folder, 0, null));
  }

  public static ObjectStore open(StoreOptions options) {
    return new FileObjectStore(options);
  }

  /**
   * A store that keeps the objects an earlier run left in its folder (a runtime restarting
   * from its journal), unreferenced until the caller retains those it knows.
   */
  public static ObjectStore reopen(StoreOptions options) {
    return new FileObjectStore(options, true);
  }

  /**
   * Gives a store a pre-faulted arena of {@code share} of its capacity, filled in the background
   * from now ({@link StoreArena}); a share of 0 keeps none.
   */
  public static void keepArena(ObjectStore store, double share) {
    long budget = (long) (share * store.capacityBytes());
    if (budget > 0 && store instanceof FileObjectStore files) {
      files.useArena(budget, dev.bulletin.bridge.impl.MemoryPressure.ofHost());
    }
  }

  /** The default place for a cluster's store: /dev/shm when the host has it, else the temp dir. */
  public static Path defaultFolder(String clusterId) {
    return defaultBase().resolve("bulletin-" + clusterId);
  }

  /** Where default stores are made: /dev/shm when the host has it, else the temp dir. */
  public static Path defaultBase() {
    Path shm = Path.of("/dev/shm");
    return Files.isDirectory(shm) && Files.isWritable(shm)
        ? shm
        : Path.of(System.getProperty("java.io.tmpdir"));
  }

  /**
   * Removes the stores in {@code base} named {@code prefix*} whose owning process has exited
   * (a process killed with SIGKILL leaves its store behind). A store whose owner runs, or whose
   * marker names no owner or cannot be read, is kept.
   *
   * @return the folders removed
   */
  public static List<Path> removeAbandoned(Path base, String prefix) {
    return StoreOwner.removeAbandoned(base, prefix);
  }

  /** The default spill folder: on local disk (the temp dir), never on the memory filesystem. */
  public static Path defaultSpillFolder(String clusterId) {
    Path tmp = Path.of(System.getProperty("java.io.tmpdir"));
    if (tmp.startsWith("/dev/shm")) {
      tmp = Path.of("/var/tmp");
    }
    return tmp.resolve("bulletin-spill-" + clusterId);
  }
}
