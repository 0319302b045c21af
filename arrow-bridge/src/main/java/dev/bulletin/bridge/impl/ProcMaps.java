package dev.bulletin.bridge.impl;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Whether some process maps a file, as /proc/PID/maps shows it: what the store must know before
 * it overwrites a released object's file for an upload (a client may still hold a zero-copy array
 * of it, an executor may have kept an argument). Python writers ask the kernel with a write lease
 * instead; Java cannot take one. Processes of other users cannot open the store's files (its
 * folder is the owner's only), so their unreadable maps do not matter. Without /proc (not Linux)
 * every file counts as mapped: nothing is reused.
 */
final class ProcMaps {
  private static final Path PROC = Path.of("/proc");

  private ProcMaps() {}

  static boolean mappedAnywhere(Path file) {
    String inode;
    try {
      inode = " " + Files.getAttribute(file, "unix:ino") + " ";
    } catch (IOException | UnsupportedOperationException | IllegalArgumentException e) {
      return true;
    }
    String name = file.getFileName().toString();
    try (DirectoryStream<Path> processes = Files.newDirectoryStream(PROC,
        p -> p.getFileName().toString().chars().allMatch(Character::isDigit))) {
      for (Path process : processes) {
        if (maps(process.resolve("maps"), inode, name)) {
          return true;
        }
      }
    } catch (IOException e) {
      return true;
    }
    return false;
  }

  private static boolean maps(Path maps, String inode, String name) {
    try (var lines = Files.lines(maps)) {
      return lines.anyMatch(line -> line.contains(inode) && line.endsWith(name));
    } catch (IOException | java.io.UncheckedIOException gone) {
      return false; // the process exited, or is another user's
    }
  }
}
