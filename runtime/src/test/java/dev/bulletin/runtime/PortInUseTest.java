package dev.bulletin.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.bulletin.worker.GpuInventory;
import dev.bulletin.worker.WorkerOptions;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** A runtime asked for a port another process holds says which, and what to do. */
class PortInUseTest {

  /** No GPU and no warm executor: the runtime starts without starting Python. */
  static final WorkerOptions NO_EXECUTORS = new WorkerOptions("w", Path.of("python3"),
      GpuInventory.none(), 1, 1L << 30, 0, 1_000, 0, WorkerOptions.DEFAULT_EXECUTOR_IDLE_MILLIS,
      Map.of());

  @TempDir Path home;

  RuntimeOptions.Builder options() {
    return RuntimeOptions.builder(home, NO_EXECUTORS).owner("owner-token-0123456789", "ada")
        .storeFolder(home.resolve("store")).spillFolder(home.resolve("spill"));
  }

  @Test
  void theApiPortInUseIsNamed() throws Exception {
    try (ServerSocket taken = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      int port = taken.getLocalPort();
      PortInUseException error = assertThrows(PortInUseException.class,
          () -> BulletinRuntime.start(options().port(port).build(), () -> { }));
      assertEquals("port " + port + " on 127.0.0.1 is in use (another bulletin runtime?"
          + " `bulletin down`, or --port)", error.getMessage());
    }
    // What the failed start opened is closed: the next one starts.
    BulletinRuntime.start(options().build(), () -> { }).close();
  }

  @Test
  void theDataPortInUseIsNamed() throws Exception {
    try (ServerSocket taken = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      int port = taken.getLocalPort();
      PortInUseException error = assertThrows(PortInUseException.class,
          () -> BulletinRuntime.start(options().dataPort(port).build(), () -> { }));
      assertEquals("port " + port + " on 127.0.0.1 is in use (another bulletin runtime?"
          + " `bulletin down`, or --data-port)", error.getMessage());
    }
  }

  @Test
  void theHttpPortInUseIsNamed() throws Exception {
    try (ServerSocket taken = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      int port = taken.getLocalPort();
      PortInUseException error = assertThrows(PortInUseException.class,
          () -> BulletinRuntime.start(options().httpPort(port).build(), () -> { }));
      assertEquals("port " + port + " on 127.0.0.1 is in use (another bulletin runtime?"
          + " `bulletin down`, or --http-port)", error.getMessage());
    }
    // What the failed start opened is closed: the next one starts.
    BulletinRuntime.start(options().build(), () -> { }).close();
  }
}
