package dev.bulletin.bridge.impl;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * Which process a store folder belongs to, written into its marker file as
 * {@code pid=PID start=EPOCH_MILLIS}: a process killed with SIGKILL never closes its store, so
 * the next one on the host tells an abandoned folder from a live one by this. The start time
 * tells a dead owner from a new process that got the same pid.
 */
public final class StoreOwner {

  private StoreOwner() {}

  /** This process, as a marker records it. */
  static String current() {
    ProcessHandle self = ProcessHandle.current();
    return format(self.pid(), self.info().startInstant().map(Instant::toEpochMilli).orElse(0L));
  }

  static String format(long pid, long startMillis) {
    return "pid=" + pid + " start=" + startMillis + "\n";
  }

  /** Writes the marker naming this process as the folder's owner. */
  static void mark(Path marker) throws IOException {
    Files.writeString(marker, current(), StandardCharsets.UTF_8);
  }

  /**
   * Whether the owner the marker names has exited. A marker that names no owner (written by an
   * older version) or cannot be read (another user's store) counts as not gone: only a folder
   * known to be abandoned is removed.
   */
  static boolean ownerGone(Path marker) {
    String text;
    try {
      text = Files.readString(marker, StandardCharsets.UTF_8).strip();
    } catch (IOException unreadable) {
      return false;
    }
    long pid = -1;
    long start = 0;
    for (String field : text.split("\\s+")) {
      try {
        if (field.startsWith("pid=")) {
          pid = Long.parseLong(field.substring(4));
        } else if (field.startsWith("start=")) {
          start = Long.parseLong(field.substring(6));
        }
      } catch (NumberFormatException malformed) {
        return false;
      }
    }
    if (pid <= 0) {
      return false;
    }
    Optional<ProcessHandle> process = ProcessHandle.of(pid).filter(ProcessHandle::isAlive);
    if (process.isEmpty()) {
      return true;
    }
    long started = process.get().info().startInstant().map(Instant::toEpochMilli).orElse(0L);
    return start != 0 && started != 0 && started != start; // the pid now names another process
  }

  /**
   * Removes the store folders in {@code base} whose name starts with {@code prefix} and whose
   * owner has exited.
   *
   * @return the folders removed
   */
  public static List<Path> removeAbandoned(Path base, String prefix) {
    List<Path> removed = new ArrayList<>();
    if (!Files.isDirectory(base)) {
      return removed;
    }
    try (DirectoryStream<Path> folders = Files.newDirectoryStream(base, prefix + "*")) {
      for (Path folder : folders) {
        Path marker = folder.resolve(FileObjectStore.MARKER);
        if (Files.isDirectory(folder) && Files.isRegularFile(marker) && ownerGone(marker)) {
          ShareMounts.unmountUnder(folder); // users' shares it had mounted
          dev.bulletin.bridge.UserFolder.deleteTree(folder);
          if (!Files.exists(folder)) {
            removed.add(folder);
          }
        }
      }
    } catch (IOException unreadable) {
      // Nothing is removed from a folder that cannot be listed.
    }
    return removed;
  }
}
