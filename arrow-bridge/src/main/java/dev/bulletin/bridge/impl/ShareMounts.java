package dev.bulletin.bridge.impl;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.logging.Logger;

/**
 * A namespace's own memory file system: a tmpfs of the user's share of the store, mounted on
 * the namespace's folder. The kernel then counts every byte in it against that share, whoever
 * wrote it (a client, an executor, the user's own {@code dd} into the staging folder), and a
 * user who fills theirs fills nobody else's: another user's write never meets a full file
 * system (where a mapped write would die of SIGBUS) because of them. Mounting needs root, as
 * running executors as other accounts does.
 */
final class ShareMounts {

  private static final Logger LOG = Logger.getLogger(ShareMounts.class.getName());

  private ShareMounts() {}

  /**
   * Mounts a tmpfs of {@code bytes} on {@code folder} (an empty folder of this process's), mode
   * 0700, with no device files, set-uid programs or executables in it.
   */
  static void mount(Path folder, long bytes) throws IOException {
    run(List.of("mount", "-t", "tmpfs", "-o", "size=" + bytes
        + ",mode=0700,nosuid,nodev,noexec", "bulletin-store", folder.toString()));
  }

  /**
   * Unmounts every file system mounted at or under {@code root}, deepest first (a runtime that
   * died left them; a store that closes takes them down). Lazily: a process that still maps an
   * object keeps its pages until it lets go, and the folder is free at once.
   */
  static void unmountUnder(Path root) {
    List<Path> mounts = mountPointsUnder(root);
    mounts.sort(Comparator.comparingInt(Path::getNameCount).reversed());
    for (Path mount : mounts) {
      try {
        run(List.of("umount", "--lazy", mount.toString()));
      } catch (IOException e) {
        LOG.warning("cannot unmount the store's file system " + mount + ": " + e.getMessage());
      }
    }
  }

  private static List<Path> mountPointsUnder(Path root) {
    Path top = root.toAbsolutePath().normalize();
    List<Path> found = new ArrayList<>();
    List<String> lines;
    try {
      lines = Files.readAllLines(Path.of("/proc/self/mountinfo"), StandardCharsets.UTF_8);
    } catch (IOException e) {
      return found;
    }
    for (String line : lines) {
      String[] fields = line.split(" ");
      if (fields.length > 4) {
        Path point = Path.of(unescape(fields[4]));
        if (point.startsWith(top)) {
          found.add(point);
        }
      }
    }
    return found;
  }

  /** mountinfo writes space, tab, newline and backslash as octal escapes. */
  private static String unescape(String field) {
    StringBuilder out = new StringBuilder();
    for (int i = 0; i < field.length(); i++) {
      char c = field.charAt(i);
      if (c == '\\' && i + 3 < field.length()) {
        out.append((char) Integer.parseInt(field.substring(i + 1, i + 4), 8));
        i += 3;
      } else {
        out.append(c);
      }
    }
    return out.toString();
  }

  private static void run(List<String> command) throws IOException {
    Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
    try {
      String said = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      if (!process.waitFor(30, TimeUnit.SECONDS) || process.exitValue() != 0) {
        process.destroyForcibly();
        throw new IOException(String.join(" ", command) + " failed: " + said.strip());
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IOException("interrupted: " + String.join(" ", command), e);
    }
  }
}
