package dev.bulletin.runtime.identity;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.UUID;

/**
 * The cluster's id, kept in {@code $BULLETIN_HOME/cluster_id} so that it survives a restart:
 * pool providers mark their workers (Slurm job names and comments, local state files) with it,
 * and a restarted runtime finds them again only under the same id.
 */
public final class ClusterId {
  private ClusterId() {}

  public static final String FILE = "cluster_id";

  /** Reads the id from {@code home}, or makes one and writes it there. */
  public static String loadOrCreate(Path home) {
    Path file = home.resolve(FILE);
    try {
      if (Files.isRegularFile(file)) {
        String id = Files.readString(file).strip();
        if (id.matches("[a-z0-9]{8}")) {
          return id;
        }
        throw new IllegalStateException(file + " holds '" + id + "', not a cluster id (8 letters"
            + " or digits); delete the file to make a new one (running pool workers are then"
            + " no longer found)");
      }
      Files.createDirectories(home);
      String id = UUID.randomUUID().toString().replace("-", "").substring(0, 8);
      Path temp = Files.createTempFile(home, FILE, ".tmp");
      Files.writeString(temp, id + "\n");
      try {
        Files.createLink(file, temp);
      } catch (FileAlreadyExistsException raced) {
        // Another runtime of this home wrote it first: use theirs.
        return loadOrCreate(home);
      } finally {
        Files.deleteIfExists(temp);
      }
      return id;
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read or write " + file + ": " + e.getMessage(), e);
    }
  }
}
