package dev.bulletin.runtime.config;

import dev.bulletin.runtime.config.UnixAccounts.Account;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.Map;
import java.util.Optional;

/**
 * Whether an account can run a program, told from the modes on the way to it as the kernel
 * resolves the path: every folder it passes through must be searchable (x) by the account, every
 * symbolic link is followed (a venv's {@code bin/python} is one) and its target's folders are
 * checked too, and the program must be executable by it. The owner's, the group's or the
 * others' bits apply, by the account's uid, primary gid and supplementary groups. ACLs and
 * mount options (noexec) are not read: this finds the common mistake, a venv under a 0700 home.
 */
final class InterpreterAccess {
  /** Links followed in one path at most, as Linux's MAXSYMLINKS. */
  private static final int MAX_LINKS = 40;
  private static final int X = 1; // execute on a file, search on a folder
  // unix:mode is the whole st_mode: the file's type is in its high bits.
  private static final int S_IFMT = 0170000;
  private static final int S_IFDIR = 0040000;

  private InterpreterAccess() {}

  /**
   * What stops the account from running {@code program} (relative: from the working folder), in
   * words that say where and the fix; empty when the account can run it.
   */
  static Optional<String> blocker(Path program, Account account) {
    try {
      Path real = new Walk(account).resolve(program.toAbsolutePath());
      Map<String, Object> attributes = attributes(real);
      if (!Files.isRegularFile(real)) {
        return Optional.of(real + " is not a file");
      }
      if (!allows(attributes, account, X)) {
        return Optional.of(real + " (" + describe(real, attributes) + ") is not executable by"
            + " it; chmod o+x " + real + " (or install it where the account can run it)");
      }
      return Optional.empty();
    } catch (Blocked blocked) {
      return Optional.of(blocked.getMessage());
    } catch (IOException e) {
      return Optional.of(program + " cannot be checked: " + e);
    }
  }

  /** One resolution, with its count of links followed. */
  private static final class Walk {
    private final Account account;
    private int links;

    Walk(Account account) {
      this.account = account;
    }

    /**
     * The real path the account reaches by {@code path}, starting at {@code /}.
     *
     * @throws Blocked naming the folder it cannot search, or the part that does not exist
     */
    Path resolve(Path path) throws IOException, Blocked {
      Path current = path.getRoot();
      for (int i = 0; i < path.getNameCount(); i++) {
        // Looking a name up in a folder, ".." included, takes search permission on the folder.
        requireSearch(current);
        String name = path.getName(i).toString();
        if (name.equals(".")) {
          continue;
        }
        if (name.equals("..")) { // current is real (links resolved), so its parent is too
          current = current.getParent() == null ? current : current.getParent();
          continue;
        }
        Path next = current.resolve(name);
        if (!Files.exists(next, LinkOption.NOFOLLOW_LINKS)) {
          throw new Blocked(next + " does not exist");
        }
        if (Files.isSymbolicLink(next)) {
          if (++links > MAX_LINKS) {
            throw new Blocked(path + " has too many symbolic links");
          }
          Path target = Files.readSymbolicLink(next);
          // A relative target is read from the link's own folder.
          next = resolve(current.resolve(target));
        }
        if (i < path.getNameCount() - 1 && !Files.isDirectory(next, LinkOption.NOFOLLOW_LINKS)) {
          throw new Blocked(next + " is not a folder");
        }
        current = next;
      }
      return current;
    }

    private void requireSearch(Path folder) throws IOException, Blocked {
      Map<String, Object> attributes = attributes(folder);
      if (!allows(attributes, account, X)) {
        throw new Blocked("the folder " + folder + " (" + describe(folder, attributes)
            + ") is not searchable by it; install the interpreter (its venv) where the account"
            + " can reach it, e.g. under /opt, or chmod o+x " + folder);
      }
    }
  }

  /** The path cannot be followed by the account; the message says where and why. */
  private static final class Blocked extends Exception {
    Blocked(String message) {
      super(message, null, false, false);
    }
  }

  private static Map<String, Object> attributes(Path path) throws IOException {
    try {
      return Files.readAttributes(path, "unix:mode,uid,gid", LinkOption.NOFOLLOW_LINKS);
    } catch (NoSuchFileException e) {
      throw new IOException(path + " does not exist", e);
    }
  }

  /**
   * Whether the mode grants {@code bit} (shifted into the others' place) to the account: the
   * owner's bits when it owns the file, else the group's when it is in the file's group, else
   * the others'. Root may search any folder, and run a file with any x bit.
   */
  static boolean allows(Map<String, Object> attributes, Account account, int bit) {
    int mode = (Integer) attributes.get("mode");
    if (account.uid() == 0) {
      return (mode & S_IFMT) == S_IFDIR || (mode & (bit << 6 | bit << 3 | bit)) != 0;
    }
    if ((Integer) attributes.get("uid") == account.uid()) {
      return (mode >> 6 & bit) != 0;
    }
    if (account.groups().contains((Integer) attributes.get("gid"))) {
      return (mode >> 3 & bit) != 0;
    }
    return (mode & bit) != 0;
  }

  /** "mode 0700, owner root, group root", for a person to see why. */
  private static String describe(Path path, Map<String, Object> attributes) {
    String owner;
    String group;
    try {
      owner = Files.getOwner(path, LinkOption.NOFOLLOW_LINKS).getName();
      group = Files.readAttributes(path, java.nio.file.attribute.PosixFileAttributes.class,
          LinkOption.NOFOLLOW_LINKS).group().getName();
    } catch (IOException | RuntimeException e) {
      owner = "uid " + attributes.get("uid");
      group = "gid " + attributes.get("gid");
    }
    return String.format("mode %04o, owner %s, group %s", (Integer) attributes.get("mode") & 07777,
        owner, group);
  }
}
