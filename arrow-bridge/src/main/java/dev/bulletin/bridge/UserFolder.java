package dev.bulletin.bridge;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.SecureDirectoryStream;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.BasicFileAttributeView;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

/**
 * A folder that a user's Unix account can write, seen from a process that may run as root: the
 * one place where the runtime and the worker agents act on names inside such a folder.
 *
 * <p>Whatever a name in it points to is the user's choice and may change at any moment (a
 * symbolic link to {@code /etc/shadow}, a hard link, a FIFO that blocks whoever opens it, a
 * folder). So nothing here opens, stats, changes the owner of, or walks a name in the folder.
 * Files cross the boundary by {@code rename(2)}, which acts on the name and never follows it:
 * <ul>
 *   <li>in ({@link #handIn}): a file of the privileged process, in a folder only it can write,
 *       is given to the account there (where nobody else can swap it), then renamed in;
 *   <li>out ({@link #takeFile}): the name is renamed into a folder only the privileged process
 *       can write, and only there, where the user can no longer change what the name is, is it
 *       checked: a regular file with one link, owned by the account. Anything else is deleted
 *       and refused, naming what it was.
 * </ul>
 * Deleting uses descriptors: {@link #deleteTree} walks with {@code openat(O_NOFOLLOW)} relative
 * to folder descriptors ({@link SecureDirectoryStream}), so a folder swapped for a link mid-walk
 * is not followed. The folder itself must sit in a folder the user cannot write (its own name
 * cannot be swapped).
 */
public final class UserFolder {

  private final Path folder;
  private final int uid;
  private final int gid;

  private UserFolder(Path folder, int uid, int gid) {
    this.folder = folder;
    this.uid = uid;
    this.gid = gid;
  }

  /**
   * The folder of an account, made (mode 0700) if missing and given to it; {@code uid} -1: this
   * process's own account (nothing is given away). The parent must be writable by this process
   * only: the folder's name is checked there, without following a link.
   */
  public static UserFolder of(Path folder, int uid, int gid) throws IOException {
    if (!Files.isDirectory(folder, LinkOption.NOFOLLOW_LINKS)) {
      Files.createDirectories(folder.getParent());
      try {
        Files.createDirectory(folder, PosixFilePermissions.asFileAttribute(
            PosixFilePermissions.fromString("rwx------")));
      } catch (java.nio.file.FileAlreadyExistsException raced) {
        if (!Files.isDirectory(folder, LinkOption.NOFOLLOW_LINKS)) {
          throw new IOException(folder + " exists and is not a folder", raced);
        }
      }
    }
    Files.setPosixFilePermissions(folder, PosixFilePermissions.fromString("rwx------"));
    if (uid >= 0) {
      Files.setAttribute(folder, "unix:gid", gid, LinkOption.NOFOLLOW_LINKS);
      Files.setAttribute(folder, "unix:uid", uid, LinkOption.NOFOLLOW_LINKS);
    }
    return new UserFolder(folder, uid, gid);
  }

  public Path path() {
    return folder;
  }

  /** The account's uid, or -1 for this process's own. */
  public int uid() {
    return uid;
  }

  /** The account's group, or -1 for this process's own. */
  public int gid() {
    return gid;
  }

  /**
   * Gives {@code file} (in a folder only this process can write) to the account and renames it
   * into this folder as {@code name}, replacing whatever entry the user put there (a link is
   * replaced, not followed; a folder there makes it fail).
   */
  public void handIn(Path file, String name) throws IOException {
    checkName(name);
    if (uid >= 0) {
      Files.setAttribute(file, "unix:gid", gid, LinkOption.NOFOLLOW_LINKS);
      Files.setAttribute(file, "unix:uid", uid, LinkOption.NOFOLLOW_LINKS);
    }
    Files.move(file, folder.resolve(name), StandardCopyOption.ATOMIC_MOVE);
  }

  /**
   * Takes the entry {@code name} out of this folder to {@code target} (a path in a folder only
   * this process can write, on the same file system) and checks it there.
   *
   * @param what names the object for the error ("object 3fa1... of alice")
   * @return the file's size
   * @throws NoSuchFileException if there is no such entry
   * @throws RefusedFileException if it is not a regular file with one link owned by the
   *     account; nothing is left at {@code target}
   */
  public long takeFile(String name, Path target, String what) throws IOException {
    checkName(name);
    Files.move(folder.resolve(name), target, StandardCopyOption.ATOMIC_MOVE);
    Map<String, Object> attributes;
    try {
      attributes = Files.readAttributes(target, "unix:mode,nlink,uid,size",
          LinkOption.NOFOLLOW_LINKS);
    } catch (IOException | RuntimeException e) {
      deleteTree(target);
      throw e;
    }
    String refusal = refusal(attributes);
    if (refusal != null) {
      deleteTree(target);
      throw new RefusedFileException(what + " was not written as a plain file: " + folder
          + "/" + name + " is " + refusal + ". Write objects only through bulletin's client");
    }
    return (Long) attributes.get("size");
  }

  /** Why the entry is refused, or null for a regular file with one link of the account. */
  private String refusal(Map<String, Object> attributes) {
    int mode = (Integer) attributes.get("mode");
    String kind = switch (mode & 0170000) {
      case 0100000 -> null;
      case 0120000 -> "a symbolic link";
      case 0040000 -> "a folder";
      case 0010000 -> "a FIFO (named pipe)";
      case 0140000 -> "a socket";
      default -> "a device file";
    };
    if (kind != null) {
      return kind;
    }
    int links = (Integer) attributes.get("nlink");
    if (links != 1) {
      return "a file with " + links + " hard links (one is allowed)";
    }
    int owner = (Integer) attributes.get("uid");
    int expected = uid >= 0 ? uid : currentUid();
    if (owner != expected) {
      return "a file owned by uid " + owner + ", not by the namespace's account (uid "
          + expected + ")";
    }
    return null;
  }

  /** Deletes the entry {@code name}, whatever it is (a link itself, a folder with its tree). */
  public void delete(String name) {
    checkName(name);
    deleteTree(folder.resolve(name));
  }

  /**
   * Deletes the entries whose names start with {@code prefix} (links themselves, never their
   * targets; folders with {@link #deleteTree}).
   */
  public void deleteEntries(String prefix) {
    List<Path> matches = new ArrayList<>();
    try (Stream<Path> entries = Files.list(folder)) {
      entries.filter(p -> p.getFileName().toString().startsWith(prefix)).forEach(matches::add);
    } catch (IOException ignored) {
      return; // the folder is gone: nothing to delete
    }
    matches.forEach(UserFolder::deleteTree);
  }

  /**
   * Deletes {@code path} and, if it is a folder, everything under it, through descriptors that
   * never follow a link (a folder a user swaps for a link mid-walk is skipped, not entered).
   * Best effort: what cannot be deleted stays. {@code path}'s parent must not be one the user
   * can replace (its own name may be).
   */
  public static void deleteTree(Path path) {
    if (path == null) {
      return;
    }
    Path absolute = path.toAbsolutePath();
    try (DirectoryStream<Path> parent = Files.newDirectoryStream(absolute.getParent())) {
      if (parent instanceof SecureDirectoryStream<Path> secure) {
        deleteIn(secure, absolute.getFileName());
        return;
      }
    } catch (IOException ignored) {
      return;
    }
    throw new UnsupportedOperationException("this platform has no descriptor-relative file"
        + " operations (SecureDirectoryStream); bulletin needs Linux");
  }

  private static void deleteIn(SecureDirectoryStream<Path> parent, Path name) {
    try {
      BasicFileAttributes attributes = parent.getFileAttributeView(name,
          BasicFileAttributeView.class, LinkOption.NOFOLLOW_LINKS).readAttributes();
      if (attributes.isDirectory()) {
        try (SecureDirectoryStream<Path> child = parent.newDirectoryStream(name,
            LinkOption.NOFOLLOW_LINKS)) {
          for (Path entry : child) {
            deleteIn(child, entry.getFileName());
          }
        }
        parent.deleteDirectory(name);
      } else {
        parent.deleteFile(name);
      }
    } catch (IOException | RuntimeException ignored) {
      // Swapped or gone mid-walk, or not ours to delete: left where it is.
    }
  }

  private static void checkName(String name) {
    if (name.isEmpty() || name.contains("/") || name.equals(".") || name.equals("..")) {
      throw new IllegalArgumentException("a name in a user's folder is one file name, got '"
          + name + "'");
    }
  }

  /** This process's uid, or -1 when it cannot be told. */
  public static int currentUid() {
    try {
      return (Integer) Files.getAttribute(Path.of("/proc/self"), "unix:uid");
    } catch (IOException | RuntimeException e) {
      return -1;
    }
  }

  /** An entry of a user's folder was not what it had to be; the message names it. */
  public static final class RefusedFileException extends ObjectStoreException {
    public RefusedFileException(String message) {
      super(message);
    }
  }
}
