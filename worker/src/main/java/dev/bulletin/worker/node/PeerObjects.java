package dev.bulletin.worker.node;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.bridge.dataport.DirectTicket;
import dev.bulletin.protocol.DirectSource;
import dev.bulletin.protocol.RegisterWorker;
import dev.bulletin.protocol.WorkerAccepted;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import java.io.IOException;
import java.net.DatagramSocket;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.logging.Logger;

/**
 * Objects moved between workers without the head: this node's own data port (serving what its
 * store keeps, on tickets the head signed with the key it gave this node at attach), and
 * fetches from another worker's port when a RunCall names one ({@code ObjectRef.direct}). A
 * keeper that cannot be reached, or refuses, leaves the fetch to the head's path (the head
 * then pulls the object from the keeper, as before direct transfers); an unreachable keeper
 * is said once in the log. Off when the cluster speaks TLS (this port has no certificate yet)
 * or objects move over gRPC only.
 */
final class PeerObjects implements AutoCloseable {
  private static final Logger LOG = Logger.getLogger(PeerObjects.class.getName());

  private final Vertx vertx;
  private final String workerId;
  private final HeadObjects head;
  /** Null: this node serves no direct port and fetches nothing directly. */
  private final DirectPort port;
  private final BulkClient client;
  private final String host;
  /** Keepers' addresses already logged as unreachable. */
  private final Set<String> unreachable = ConcurrentHashMap.newKeySet();

  private PeerObjects(Vertx vertx, String workerId, HeadObjects head, DirectPort port,
      ObjectStore store, String host) {
    this.vertx = vertx;
    this.workerId = workerId;
    this.head = head;
    this.port = port;
    this.host = host;
    this.client = port == null ? null : new BulkClient(store, null);
  }

  /**
   * @param enabled whether this node takes part (plaintext data port, not gRPC only)
   */
  static PeerObjects start(Vertx vertx, WorkerNodeOptions options, HeadObjects head,
      ObjectStore store, boolean enabled) {
    String workerId = options.worker().workerId();
    if (!enabled) {
      return new PeerObjects(vertx, workerId, head, null, store, "");
    }
    String host = towards(options.headHost());
    // Behind NAT, or with several interfaces, the address others reach this host by may not be
    // the one that routes to the head: BULLETIN_DIRECT_HOST names it (the port stays bound to
    // the interface towards the head).
    String announced = System.getenv().getOrDefault("BULLETIN_DIRECT_HOST", "").trim();
    try {
      return new PeerObjects(vertx, workerId, head, DirectPort.start(host, store), store,
          announced.isEmpty() ? host : announced);
    } catch (IOException e) {
      LOG.warning(e.getMessage() + "; objects this worker keeps go through the head");
      return new PeerObjects(vertx, workerId, head, null, store, "");
    }
  }

  /**
   * The address of this host's interface that routes to the head: the one other workers of the
   * cluster reach this host on (a loopback head: loopback). Connecting a UDP socket sends
   * nothing; it only picks the route.
   */
  static String towards(String headHost) {
    try (DatagramSocket probe = new DatagramSocket()) {
      probe.connect(InetAddress.getByName(headHost), 9);
      InetAddress local = probe.getLocalAddress();
      return local.isAnyLocalAddress() ? "127.0.0.1" : local.getHostAddress();
    } catch (IOException e) {
      return "127.0.0.1";
    }
  }

  /** Announces the port in the registration (port 0: none). */
  RegisterWorker.Builder announce(RegisterWorker.Builder register) {
    return port == null ? register : register.setDirectHost(host).setDirectPort(port.port());
  }

  /** The head accepted this node: tickets for its port are signed with this key from now on. */
  void accepted(WorkerAccepted accepted) {
    if (port != null && !accepted.getDirectTicketKey().isEmpty()) {
      port.ticketKey(accepted.getDirectTicketKey().toByteArray());
    }
  }

  /** Fetches an object from the worker that keeps it, else through the head. */
  Future<ObjectKey> fetch(ObjectKey key, long size, DirectSource source) {
    if (client == null) {
      return head.fetch(key, size);
    }
    InetSocketAddress address;
    try {
      address = address(source.getAddress());
    } catch (IllegalArgumentException e) {
      return head.fetch(key, size);
    }
    byte[] request = DirectTicket.request(workerId, key, source.getTicket().toByteArray());
    return vertx.<ObjectKey>executeBlocking(() -> client.getDirect(address, request, key), false)
        .recover(error -> {
          if (error instanceof BulkClient.UnreachableException) {
            if (unreachable.add(source.getAddress())) {
              LOG.warning("worker " + source.getKeeper() + "'s data port " + source.getAddress()
                  + " cannot be reached from worker " + workerId + " (" + error.getMessage()
                  + "); its objects come through the head instead");
            }
          } else {
            LOG.warning("worker " + source.getKeeper() + " did not send " + key + " directly: "
                + error.getMessage() + "; fetching it through the head");
          }
          return head.fetch(key, size);
        });
  }

  static InetSocketAddress address(String hostPort) {
    int colon = hostPort.lastIndexOf(':');
    if (colon <= 0) {
      throw new IllegalArgumentException("not host:port: " + hostPort);
    }
    return new InetSocketAddress(hostPort.substring(0, colon),
        Integer.parseInt(hostPort.substring(colon + 1)));
  }

  /** Bytes this node's port has sent to other workers and clients. */
  long servedBytes() {
    return port == null ? 0 : port.servedBytes();
  }

  @Override
  public void close() {
    if (port != null) {
      port.close();
    }
    if (client != null) {
      client.close();
    }
  }
}
