package dev.bulletin.worker;

import java.io.IOException;
import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;

/** This host's name, for status, logs and the addresses workers dial. */
public final class HostName {
  private HostName() {}

  /** The kernel's host name (what Python's socket.gethostname() reports), else the resolver's. */
  public static String get() {
    try {
      String name = Files.readString(Path.of("/proc/sys/kernel/hostname")).strip();
      if (!name.isEmpty()) {
        return name;
      }
    } catch (IOException notLinux) {
      // Ask the resolver instead.
    }
    try {
      return InetAddress.getLocalHost().getHostName();
    } catch (IOException e) {
      return "localhost";
    }
  }
}
