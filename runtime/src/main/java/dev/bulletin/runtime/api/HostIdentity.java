package dev.bulletin.runtime.api;

import dev.bulletin.worker.HostName;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;

/**
 * Which host and network namespace this process runs in, as HelloReply.host_id: a client that
 * computes the same value (bulletin/_data/_objects.py host_id) shares the store's memory filesystem and
 * may write objects straight into it. The network namespace is part of it so that a client in
 * another namespace takes the network path, as one on another host would.
 */
final class HostIdentity {
  private HostIdentity() {}

  static String compute() {
    String boot = read(Path.of("/proc/sys/kernel/random/boot_id"));
    String netns;
    try {
      netns = Files.readSymbolicLink(Path.of("/proc/self/ns/net")).toString();
    } catch (IOException | UnsupportedOperationException e) {
      netns = "";
    }
    String text = boot + "\n" + HostName.get() + "\n" + netns;
    try {
      byte[] digest = MessageDigest.getInstance("SHA-256")
          .digest(text.getBytes(StandardCharsets.UTF_8));
      return HexFormat.of().formatHex(digest, 0, 16);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("every JDK ships SHA-256", e);
    }
  }


  private static String read(Path file) {
    try {
      return Files.readString(file).strip();
    } catch (IOException e) {
      return "";
    }
  }
}
