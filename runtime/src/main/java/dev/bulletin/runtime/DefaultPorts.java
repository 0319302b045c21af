package dev.bulletin.runtime;

import java.util.function.Consumer;

/**
 * Where the runtime listens when a port is left at its default: as Jupyter does, a default port
 * that another process holds (a second `bulletin up` on a login node, a test beside a demo)
 * moves to the next free one, and the move is said ("port 8780 is in use, using 8781"). A port
 * that was asked for is the user's choice: one that is taken stays an error
 * ({@link PortInUseException}). Clients find the port the runtime took in runtime.json.
 */
public final class DefaultPorts {
  /** Ports tried after the default before any free port is taken (Jupyter's port_retries). */
  static final int RETRIES = 50;

  private DefaultPorts() {}

  /**
   * The port to listen on.
   *
   * @param port the option's value (0 and off: any free port and none, left as they are)
   * @param given whether the user chose it (on the command line or in the environment)
   * @param option the option that chooses it, e.g. "--http-port"
   * @param say told of a move, in one line
   * @throws PortInUseException a port that was given is taken
   */
  public static int choose(String host, int port, boolean given, String option,
      Consumer<String> say) throws PortInUseException {
    if (given || port <= 0) {
      Main.checkPortFree(host, port, option);
      return port;
    }
    for (int candidate = port; candidate <= Math.min(65_535, port + RETRIES); candidate++) {
      try {
        Main.checkPortFree(host, candidate, option);
      } catch (PortInUseException taken) {
        continue;
      }
      if (candidate != port) {
        say.accept("port " + port + " is in use, using " + candidate + " (" + option
            + " N chooses one)");
      }
      return candidate;
    }
    say.accept("port " + port + " and the " + RETRIES + " after it are in use, using any free"
        + " port (" + option + " N chooses one)");
    return 0;
  }
}
