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
 * @param userShareBytes each namespace's share of the memory folder, enforced by the kernel: its
 *     folder is a file system of its own of this size (needs root; docs/security.md); 0 for
 *     none: namespaces share the memory folder, counted by the store's table only
 */
public record StoreOptions(Path folder, long capacityBytes, Path spillFolder,
    long userShareBytes) {

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
    if (userShareBytes < 0) {
      throw new IllegalArgumentException("store userShareBytes must be >= 0 (0: none), got "
          + userShareBytes);
    }
  }

  public StoreOptions(Path folder, long capacityBytes, Path spillFolder) {
    this(folder, capacityBytes, spillFolder, 0);
  }

  /** These options with each namespace held to {@code bytes} of memory (0: not held). */
  public StoreOptions withUserShare(long bytes) {
    return new StoreOptions(folder, capacityBytes, spillFolder, bytes);
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
