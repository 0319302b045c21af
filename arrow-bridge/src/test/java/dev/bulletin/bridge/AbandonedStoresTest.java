package dev.bulletin.bridge;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A store left by a process killed with SIGKILL (which skips its cleanup) is removed by the
 * next one that sweeps; live stores, and folders not known to be abandoned, stay.
 */
class AbandonedStoresTest {

  @TempDir Path base;

  /** The child process: opens a store in args[0], says so, and waits to be killed. */
  public static final class OpenStoreAndWait {
    public static void main(String[] args) throws Exception {
      ObjectStore store = ObjectStores.inFolder(Path.of(args[0]));
      store.put(ObjectKey.of("ada", String.format("%032x", 1)), ByteBuffer.wrap(new byte[4096]));
      System.out.println("ready");
      System.out.flush();
      Thread.sleep(TimeUnit.MINUTES.toMillis(5));
    }
  }

  /** Starts a JVM that owns a store in {@code folder}; returns once the store exists. */
  static Process storeOwner(Path folder) throws Exception {
    List<String> command = new ArrayList<>();
    command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    command.addAll(ManagementFactory.getRuntimeMXBean().getInputArguments().stream()
        .filter(arg -> arg.startsWith("--add-opens")).toList());
    command.addAll(List.of("-cp", System.getProperty("java.class.path"),
        OpenStoreAndWait.class.getName(), folder.toString()));
    Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
    BufferedReader out = new BufferedReader(new InputStreamReader(process.getInputStream(),
        StandardCharsets.UTF_8));
    String line = out.readLine();
    assertEquals("ready", line, "the child could not open its store");
    return process;
  }

  @Test
  void theStoreOfAKilledProcessIsRemovedAndLiveOnesStay() throws Exception {
    Path killed = base.resolve("bulletin-worker-a-1");
    Process owner = storeOwner(killed);
    owner.destroyForcibly(); // SIGKILL: the store is never closed
    assertTrue(owner.waitFor(60, TimeUnit.SECONDS));
    assertTrue(Files.isDirectory(killed), "SIGKILL left the store behind");

    Path live = base.resolve("bulletin-worker-b-2");
    Path otherKind = base.resolve("bulletin-cluster");
    Path noOwner = base.resolve("bulletin-worker-old-3");
    Files.createDirectories(noOwner.resolve("ada"));
    Files.writeString(noOwner.resolve(".bulletin-store"), ""); // an older version's marker
    Path notAStore = base.resolve("bulletin-worker-notes");
    Files.createDirectories(notAStore);
    try (ObjectStore mine = ObjectStores.inFolder(live);
         ObjectStore cluster = ObjectStores.inFolder(otherKind)) {
      Process stillRunning = storeOwner(base.resolve("bulletin-worker-c-4"));
      try {
        List<Path> removed = ObjectStores.removeAbandoned(base, "bulletin-worker-");

        assertEquals(List.of(killed), removed);
        assertFalse(Files.exists(killed));
        assertTrue(Files.isDirectory(live), "this process's store is in use");
        assertTrue(Files.isDirectory(base.resolve("bulletin-worker-c-4")), "its owner runs");
        assertTrue(Files.isDirectory(otherKind), "another prefix");
        assertTrue(Files.isDirectory(noOwner), "a marker that names no owner");
        assertTrue(Files.isDirectory(notAStore), "not a store");
      } finally {
        stillRunning.destroyForcibly().waitFor(60, TimeUnit.SECONDS);
      }
    }
  }
}
