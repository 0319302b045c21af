package dev.bulletin.bridge.impl;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.stream.Stream;

/** File helpers of the store: owner-only folders, whole writes, atomic publication. */
final class Files2 {
  private Files2() {}

  static Path ownerOnlyFolder(Path folder) throws IOException {
    Files.createDirectories(folder);
    // Objects hold users' code and data: only the runtime's user may read them.
    Files.setPosixFilePermissions(folder, PosixFilePermissions.fromString("rwx------"));
    return folder;
  }

  static void writeFully(Path target, ByteBuffer bytes) throws IOException {
    try (FileChannel out = FileChannel.open(target, StandardOpenOption.CREATE_NEW,
        StandardOpenOption.WRITE)) {
      ByteBuffer source = bytes.duplicate();
      while (source.hasRemaining()) {
        out.write(source);
      }
    }
  }

  /** Renames within one folder tree; the target appears whole or not at all. */
  static void publish(Path temp, Path target) throws IOException {
    try {
      Files.move(temp, target, StandardCopyOption.ATOMIC_MOVE);
    } catch (AtomicMoveNotSupportedException e) {
      throw new IOException("folder " + target.getParent() + " must support atomic rename", e);
    }
  }

  static void deleteQuietly(Path path) {
    try {
      Files.deleteIfExists(path);
    } catch (IOException ignored) {
      // A leftover file is reclaimed when the store closes.
    }
  }

  static boolean isEmptyOrMissing(Path folder) throws IOException {
    if (!Files.isDirectory(folder)) {
      return true;
    }
    try (Stream<Path> files = Files.list(folder)) {
      return files.findAny().isEmpty();
    }
  }
}
