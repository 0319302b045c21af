package dev.bulletin.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.net.ServerSocket;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** A default port that is taken moves to a free one and says so; a given one stays an error. */
class DefaultPortsTest {

  @Test
  void aTakenDefaultMovesToAFreePortAndSaysWhich() throws Exception {
    try (ServerSocket taken = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      int port = taken.getLocalPort();
      List<String> said = new ArrayList<>();
      int chosen = DefaultPorts.choose("127.0.0.1", port, false, "--http-port", said::add);
      assertNotEquals(port, chosen);
      assertTrue(chosen == 0 || chosen > port, "moved upwards or to any free port: " + chosen);
      assertEquals(1, said.size(), said.toString());
      assertTrue(said.get(0).startsWith("port " + port + " is in use, using "), said.get(0));
      try (ServerSocket mine = new ServerSocket(chosen, 1, InetAddress.getLoopbackAddress())) {
        assertTrue(mine.getLocalPort() > 0, "the chosen port is free");
      }
    }
  }

  @Test
  void aGivenPortThatIsTakenIsAnErrorAsBefore() throws Exception {
    try (ServerSocket taken = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      int port = taken.getLocalPort();
      List<String> said = new ArrayList<>();
      PortInUseException error = assertThrows(PortInUseException.class,
          () -> DefaultPorts.choose("127.0.0.1", port, true, "--port", said::add));
      assertTrue(error.getMessage().contains("port " + port + " on 127.0.0.1 is in use"),
          error.getMessage());
      assertTrue(said.isEmpty(), said.toString());
    }
  }

  @Test
  void aFreeDefaultAnyPortAndOffStayAsTheyAreSilently() throws Exception {
    int free;
    try (ServerSocket probe = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      free = probe.getLocalPort();
    }
    List<String> said = new ArrayList<>();
    assertEquals(free, DefaultPorts.choose("127.0.0.1", free, false, "--port", said::add));
    assertEquals(0, DefaultPorts.choose("127.0.0.1", 0, false, "--port", said::add));
    assertEquals(RuntimeOptions.HTTP_OFF, DefaultPorts.choose("127.0.0.1",
        RuntimeOptions.HTTP_OFF, false, "--http-port", said::add));
    assertTrue(said.isEmpty(), said.toString());
  }
}
