package dev.bulletin.runtime;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.net.InetAddress;
import java.net.ServerSocket;
import org.junit.jupiter.api.Test;

/**
 * `bulletin up` on a port another process holds says so first and alone: Main checks the ports
 * before anything starts (issue 27: 28 lines of Vert.x "Thread blocked" frames came first).
 */
class MainPortCheckTest {

  @Test
  void aTakenPortIsNamedWithItsOption() throws Exception {
    try (ServerSocket taken = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      int port = taken.getLocalPort();
      for (String option : new String[] {"--port", "--data-port", "--http-port"}) {
        PortInUseException error = assertThrows(PortInUseException.class,
            () -> Main.checkPortFree("127.0.0.1", port, option));
        assertEquals("port " + port + " on 127.0.0.1 is in use (another bulletin runtime?"
            + " `bulletin down`, or " + option + ")", error.getMessage());
      }
    }
  }

  @Test
  void aFreePortAnyPortAndNoPortPass() throws Exception {
    int free;
    try (ServerSocket probe = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      free = probe.getLocalPort();
    }
    assertDoesNotThrow(() -> Main.checkPortFree("127.0.0.1", free, "--port"));
    assertDoesNotThrow(() -> Main.checkPortFree("127.0.0.1", 0, "--port"));
    assertDoesNotThrow(() -> Main.checkPortFree("127.0.0.1", RuntimeOptions.HTTP_OFF,
        "--http-port"));
  }

  @Test
  void anAddressThatIsNotThisMachinesIsLeftToTheListen() {
    // TEST-NET-1 (RFC 5737): binding fails with "Cannot assign requested address", not in use.
    assertDoesNotThrow(() -> Main.checkPortFree("192.0.2.1", 8770, "--port"));
  }
}
