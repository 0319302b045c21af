package dev.bulletin.runtime.identity.impl;

import dev.bulletin.runtime.identity.WorkerRoster;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

/**
 * {@link WorkerRoster} in a text file, one {@code issued ID} or {@code revoked ID} a line,
 * rewritten whole on each change through a temporary file renamed over it (a crash leaves the
 * old roster or the new, never half of one), owner-only. Worker ids hold no whitespace or line
 * breaks (refused on issue), so a line is one entry.
 */
public final class FileWorkerRoster implements WorkerRoster {
  private static final String ISSUED = "issued ";
  private static final String REVOKED = "revoked ";

  private final Path file;
  private final Set<String> issued = new LinkedHashSet<>();
  private final Set<String> revoked = new LinkedHashSet<>();

  private FileWorkerRoster(Path file) {
    this.file = file;
  }

  public static FileWorkerRoster open(Path file) throws IOException {
    FileWorkerRoster roster = new FileWorkerRoster(file);
    if (Files.exists(file, LinkOption.NOFOLLOW_LINKS)) {
      if (!Files.isRegularFile(file, LinkOption.NOFOLLOW_LINKS)) {
        throw new IOException(file + " is not a regular file: remove it (it should hold the"
            + " runtime's list of issued and revoked workers)");
      }
      for (String line : Files.readAllLines(file, StandardCharsets.UTF_8)) {
        if (line.startsWith(ISSUED)) {
          roster.issued.add(line.substring(ISSUED.length()));
        } else if (line.startsWith(REVOKED)) {
          roster.revoked.add(line.substring(REVOKED.length()));
        } else if (!line.isBlank()) {
          throw new IOException(file + ": unreadable line '" + line + "'");
        }
      }
    }
    return roster;
  }

  @Override
  public synchronized void issued(String workerId) throws IOException {
    check(workerId);
    if (issued.add(workerId)) {
      write();
    }
  }

  @Override
  public synchronized boolean known(String workerId) {
    return issued.contains(workerId) || revoked.contains(workerId);
  }

  @Override
  public synchronized void revoke(String workerId) throws IOException {
    check(workerId);
    if (revoked.add(workerId)) {
      write();
    }
  }

  @Override
  public synchronized boolean revoked(String workerId) {
    return revoked.contains(workerId);
  }

  private static void check(String workerId) {
    if (workerId == null || workerId.isEmpty() || workerId.length() > 128
        || !workerId.chars().allMatch(c -> c > ' ' && c != 0x7f)) {
      throw new IllegalArgumentException("a worker id is 1 to 128 printable characters without"
          + " spaces, not '" + workerId + "'");
    }
  }

  private void write() throws IOException {
    List<String> lines = new ArrayList<>();
    issued.forEach(id -> lines.add(ISSUED + id));
    revoked.forEach(id -> lines.add(REVOKED + id));
    Files.createDirectories(file.getParent());
    Path temp = file.resolveSibling(file.getFileName() + ".tmp");
    Files.deleteIfExists(temp); // a link planted there is removed, never followed
    Files.write(Files.createFile(temp, PosixFilePermissions.asFileAttribute(
        PosixFilePermissions.fromString("rw-------"))), lines, StandardCharsets.UTF_8,
        StandardOpenOption.WRITE, StandardOpenOption.SYNC);
    Files.move(temp, file, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
  }
}
