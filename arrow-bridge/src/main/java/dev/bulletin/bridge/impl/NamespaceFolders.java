package dev.bulletin.bridge.impl;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStoreException;
import dev.bulletin.bridge.StoreFullException;
import dev.bulletin.bridge.UserFolder;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Stream;

/**
 * Each namespace's two folders, and the Unix account they serve:
 * <ul>
 *   <li>{@code root/namespace/}: its published objects. Always the store owner's, so no user can
 *       put, swap or remove a name in it, and the store reads, maps and serves its files by
 *       name safely. Mode 0711 once given to an account: that account passes through to its
 *       files (each given to it, mode 0600), nobody lists it.
 *   <li>{@code root/namespace/.staging/}: what the account's processes write (same-host
 *       clients, executors' results, the files handed to them to overwrite). The account's own,
 *       0700, and hostile to the store: only {@link UserFolder} acts on names in it.
 * </ul>
 * With a user share, the objects folder is a file system of its own of that size
 * ({@link ShareMounts}), made with the folder: everything of the namespace, published or staged,
 * whoever wrote it, counts against the share, and filling it fills nobody else's.
 */
final class NamespaceFolders {

  static final String STAGING = ".staging";
  private static final dev.bulletin.bridge.ObjectId ZERO_ID =
      dev.bulletin.bridge.ObjectId.parse("0".repeat(32));

  private final Path root;
  /** Each namespace's file system size; 0: namespaces share the store's memory folder. */
  private final long shareBytes;
  private final Map<String, UserFolder> staging = new ConcurrentHashMap<>();

  NamespaceFolders(Path root, long shareBytes) {
    this.root = root;
    this.shareBytes = shareBytes;
  }

  /** Whether each namespace is held to a share by a file system of its own. */
  boolean shared() {
    return shareBytes > 0;
  }

  /** Each namespace's share, 0 when none. */
  long shareBytes() {
    return shareBytes;
  }

  /**
   * Checks that {@code needed} more bytes fit in the namespace's share, asking {@code evict} to
   * free its least recently used unreferenced objects while they do not.
   *
   * @param evict deletes one evictable object of the namespace; false when there is none left
   * @throws StoreFullException naming the namespace's use and its share when they cannot
   */
  void checkRoom(ObjectKey key, long needed, java.util.function.BooleanSupplier evict) {
    if (shareBytes <= 0) {
      return;
    }
    Path objects = objects(key.namespace());
    try {
      java.nio.file.FileStore share = Files.getFileStore(objects);
      while (share.getUsableSpace() < needed) {
        if (!evict.getAsBoolean()) {
          long total = share.getTotalSpace();
          long used = total - share.getUsableSpace();
          throw new StoreFullException("object " + key.id() + " (" + mib(needed) + ") does"
              + " not fit in " + key.namespace() + "'s share of this node's object store: "
              + mib(used) + " of " + mib(total) + " are in use (objects held,"
              + " and files being written or left in " + STAGING + "); release objects you no"
              + " longer need (del the futures and refs, Ref.release()), or ask the cluster's"
              + " owner for a larger --store-user-share");
        }
      }
    } catch (IOException e) {
      throw new ObjectStoreException("cannot read the size of " + objects + ": " + e, e);
    }
  }

  /** The objects folder, made (0700) with its staging folder if missing. */
  Path objects(String namespace) {
    return staging(namespace).path().getParent();
  }

  /** The staging folder: this process's own until {@link #giveTo} gives it away. */
  UserFolder staging(String namespace) {
    UserFolder folder = staging.get(namespace);
    if (folder != null) {
      return folder;
    }
    synchronized (this) {
      folder = staging.get(namespace);
      if (folder == null) {
        folder = make(namespace, -1, -1);
        staging.put(namespace, folder);
      }
      return folder;
    }
  }

  /**
   * Gives a namespace to an account: its staging folder becomes the account's, its objects
   * (those there now and every one published later) the account's to read, mode 0600, and the
   * objects folder and the store's root become passable (0711), never listable.
   */
  synchronized void giveTo(String namespace, int uid, int gid) {
    UserFolder current = staging.get(namespace);
    if (current != null && current.uid() == uid) {
      return;
    }
    UserFolder given = make(namespace, uid, gid);
    Path objects = given.path().getParent();
    try {
      try (Stream<Path> files = Files.list(objects)) {
        for (Path file : (Iterable<Path>) files::iterator) {
          if (!file.getFileName().toString().equals(STAGING)) {
            giveFile(file, uid, gid);
          }
        }
      }
      Files.setPosixFilePermissions(objects, PosixFilePermissions.fromString("rwx--x--x"));
      Files.setPosixFilePermissions(root, PosixFilePermissions.fromString("rwx--x--x"));
    } catch (IOException | UnsupportedOperationException | SecurityException e) {
      throw new ObjectStoreException("cannot give the object folder " + objects + " to uid "
          + uid + ": " + e, e);
    }
    staging.put(namespace, given);
  }

  /**
   * Readies a file this process wrote in the objects folder (a temporary, before its rename)
   * for the namespace's account: given to it, mode 0600. A no-op for the store owner's own.
   */
  void prepare(String namespace, Path temp) throws IOException {
    UserFolder folder = staging.get(namespace);
    if (folder != null && folder.uid() >= 0) {
      giveFile(temp, folder.uid(), folder.gid());
    }
  }

  /**
   * Takes a staged file of the namespace's account into the objects folder as {@code temp},
   * refusing (and deleting) anything but a plain file of the account.
   *
   * @return its size
   */
  long take(ObjectKey key, String stagedName, Path temp) {
    try {
      long size = staging(key.namespace()).takeFile(stagedName, temp, "object " + key);
      Files.setPosixFilePermissions(temp, PosixFilePermissions.fromString("rw-------"));
      return size;
    } catch (java.nio.file.NoSuchFileException e) {
      throw new ObjectStoreException("staged object " + stagedName + " for " + key + " is not"
          + " in " + staging(key.namespace()).path(), e);
    } catch (IOException e) {
      Files2.deleteQuietly(temp);
      throw new ObjectStoreException("staged object " + stagedName + " for " + key
          + " cannot be taken: " + e, e);
    }
  }

  private static String mib(long bytes) {
    return String.format(java.util.Locale.ROOT, "%.1f MiB", bytes / 1048576.0);
  }

  private UserFolder make(String namespace, int uid, int gid) {
    // Through ObjectKey: a namespace is one safe name, never "..", never dot-prefixed.
    Path objects = root.resolve(new ObjectKey(namespace, ZERO_ID).namespace());
    try {
      if (!Files.isDirectory(objects, LinkOption.NOFOLLOW_LINKS)) {
        Files2.ownerOnlyFolder(objects);
        if (shareBytes > 0) {
          ShareMounts.mount(objects, shareBytes); // before anything is in it
        }
      }
      return UserFolder.of(objects.resolve(STAGING), uid, gid);
    } catch (IOException | UnsupportedOperationException | SecurityException e) {
      throw new ObjectStoreException("cannot create the object folders of " + namespace + " in "
          + root + ": " + e, e);
    }
  }

  /** Only for files in the objects folder, whose names no user can change. */
  private static void giveFile(Path file, int uid, int gid) throws IOException {
    Files.setAttribute(file, "unix:gid", gid, LinkOption.NOFOLLOW_LINKS);
    Files.setAttribute(file, "unix:uid", uid, LinkOption.NOFOLLOW_LINKS);
    Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("rw-------"));
  }
}
