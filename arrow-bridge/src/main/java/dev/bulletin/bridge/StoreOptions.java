package dev.bulletin.bridge;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Where and how big a node's object store is. Validated on construction.
 *
 * @param folder the memory folder (a /dev/shm folder); objects live in {@code folder/namespace/id}
 * @param capacityBytes how many bytes the memory folder may hold; beyond it unreferenced objects
 *     are evicted and referenced ones spilled
 * @param spillFolder a local-disk folder for objects pushed out of memory, or null for none
 */
public record StoreOptions(Path folder, long capacityBytes, Path spillFolder) {

  /** The share of the memory filesystem a store takes by default. */
  public static final double DEFAULT_SHARE = 0.5;

  public StoreOptions {
    if (folder == null) {
      throw new IllegalArgumentException("store folder is required");
    }
    if (capacityBytes <= 0) {
      throw new IllegalArgumentException("store capacityBytes must be > 0, got " + capacityBytes);
    }
    if (spillFolder != null && spillFolder.normalize().equals(folder.normalize())) {
      throw new IllegalArgumentException("store spillFolder must differ from folder " + folder);
    }
  }

  /**
   * Options with defaults filled in: capacity 0 means half of the memory filesystem's size
   * (/dev/shm is RAM; the rest stays for the processes that use the objects).
   */
  public static StoreOptions withDefaults(Path folder, long capacityBytes, Path spillFolder) {
    long capacity = capacityBytes > 0 ? capacityBytes : defaultCapacity(folder);
    return new StoreOptions(folder, capacity, spillFolder);
  }

  static long defaultCapacity(Path folder) {
    Path probe = folder.toAbsolutePath();
    while (probe != null && !Files.exists(probe)) {
      probe = probe.getParent();
    }
    try {
      return Math.max(1L << 20, (long) (Files.getFileStore(probe).getTotalSpace() * DEFAULT_SHARE));
    } catch (IOException | NullPointerException e) {
      return 1L << 30;
    }
  }
}
