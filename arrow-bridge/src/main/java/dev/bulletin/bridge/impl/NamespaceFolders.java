package dev.bulletin.bridge.impl;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStoreException;
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
 */
final class NamespaceFolders {

  static final String STAGING = ".staging";
  private static final dev.bulletin.bridge.ObjectId ZERO_ID =
      dev.bulletin.bridge.ObjectId.parse("0".repeat(32));

  private final Path root;
  private final Map<String, UserFolder> staging = new ConcurrentHashMap<>();

  NamespaceFolders(Path root) {
    this.root = root;
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

  private UserFolder make(String namespace, int uid, int gid) {
    // Through ObjectKey: a namespace is one safe name, never "..", never dot-prefixed.
    Path objects = root.resolve(new ObjectKey(namespace, ZERO_ID).namespace());
    try {
      if (!Files.isDirectory(objects, LinkOption.NOFOLLOW_LINKS)) {
        Files2.ownerOnlyFolder(objects);
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
