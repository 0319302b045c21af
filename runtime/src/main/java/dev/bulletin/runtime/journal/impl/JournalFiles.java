package dev.bulletin.runtime.journal.impl;

import dev.bulletin.runtime.journal.JournalException;
import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.OverlappingFileLockException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * The journal folder's files: {@code log-N} (records appended after snapshot N's state) and
 * {@code snapshot-N} (the state as of the start of log N), numbered by N; {@code lock}, held
 * while a runtime uses the folder.
 */
final class JournalFiles {
  private static final Pattern NAME = Pattern.compile("(log|snapshot)-(\\d{12})");
  private final Path folder;

  JournalFiles(Path folder) {
    this.folder = folder;
  }

  Path folder() {
    return folder;
  }

  Path log(long n) {
    return folder.resolve(String.format("log-%012d", n));
  }

  Path snapshot(long n) {
    return folder.resolve(String.format("snapshot-%012d", n));
  }

  Path snapshotTemp(long n) {
    return folder.resolve(String.format(".snapshot-%012d.tmp", n));
  }

  /** Numbers of the files of one kind, ascending. */
  List<Long> numbers(String kind) throws IOException {
    List<Long> out = new ArrayList<>();
    try (Stream<Path> files = Files.list(folder)) {
      files.forEach(file -> {
        Matcher m = NAME.matcher(file.getFileName().toString());
        if (m.matches() && m.group(1).equals(kind)) {
          out.add(Long.parseLong(m.group(2)));
        }
      });
    }
    out.sort(null);
    return out;
  }

  /** Snapshots a crash interrupted before they were complete: never read, removed. */
  void removeTemporaries() throws IOException {
    try (Stream<Path> files = Files.list(folder)) {
      for (Path file : (Iterable<Path>) files::iterator) {
        if (file.getFileName().toString().startsWith(".snapshot-")) {
          Files.deleteIfExists(file);
        }
      }
    }
  }

  /** Creates the folder (owner-only) and takes its lock: one runtime per journal. */
  FileLock lock() {
    try {
      if (!Files.isDirectory(folder)) {
        Files.createDirectories(folder, PosixFilePermissions.asFileAttribute(
            PosixFilePermissions.fromString("rwx------")));
      }
      Path lockFile = folder.resolve("lock");
      FileChannel channel = FileChannel.open(lockFile, StandardOpenOption.CREATE,
          StandardOpenOption.READ, StandardOpenOption.WRITE);
      FileLock lock;
      try {
        lock = channel.tryLock();
      } catch (OverlappingFileLockException e) {
        lock = null;
      }
      if (lock == null) {
        String holder = Files.readString(lockFile, StandardCharsets.UTF_8).strip();
        channel.close();
        throw new JournalException("the state directory " + folder.getParent() + " is in use by"
            + " another bulletin runtime (" + (holder.isEmpty() ? "unknown" : holder) + "); stop"
            + " it first, or give this one another --state-dir");
      }
      channel.truncate(0);
      channel.write(java.nio.ByteBuffer.wrap(("pid " + ProcessHandle.current().pid())
          .getBytes(StandardCharsets.UTF_8)), 0);
      return lock;
    } catch (IOException e) {
      throw new JournalException("cannot open the journal folder " + folder + ": " + e, e);
    }
  }

  /** Makes renames and new files in the folder durable. */
  void syncFolder() throws IOException {
    try (FileChannel dir = FileChannel.open(folder, StandardOpenOption.READ)) {
      dir.force(true);
    } catch (IOException e) {
      // Some file systems cannot fsync a directory; the rename is then as durable as they make it.
    }
  }
}
