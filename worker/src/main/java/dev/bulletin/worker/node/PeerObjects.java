package dev.bulletin.worker.node;

import com.google.protobuf.ByteString;
import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.bridge.dataport.DirectTicket;
import dev.bulletin.bridge.dataport.TlsEngines;
import dev.bulletin.protocol.DirectSource;
import dev.bulletin.protocol.RegisterWorker;
import dev.bulletin.protocol.WorkerAccepted;
import dev.bulletin.worker.tls.DataTls;
import dev.bulletin.worker.tls.PinnedTrust;
import dev.bulletin.worker.tls.RenewableKeys;
import dev.bulletin.worker.tls.TlsOptions;
import java.security.cert.X509Certificate;
import dev.bulletin.worker.tls.PortIdentity;
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
 * is said once in the log. Off when objects move over gRPC only. When the cluster speaks TLS
 * the port does too, with a key and self-signed certificate made at start
 * ({@link PortIdentity}); the registration carries the certificate's fingerprint, and a fetch
 * accepts only the keeper certificate whose fingerprint came with the ticket
 * ({@link PinnedTrust}).
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
  /** The port's TLS identity; null when the cluster (and so the port) is plaintext. */
  private final PortIdentity identity;
  private final PinnedTrust pins = new PinnedTrust();
  /** Keepers' addresses already logged as unreachable. */
  private final Set<String> unreachable = ConcurrentHashMap.newKeySet();

  /**
   * This worker's own certificate on its port (renewed while it runs), and the cluster CA that
   * keepers' certificates are checked against; both null for a worker of the shared token.
   */
  private final RenewableKeys certified;
  private final X509Certificate clusterCa;
  /** Whether the cluster speaks TLS (no keeper is then read in plaintext). */
  private final boolean clusterTls;

  private PeerObjects(Vertx vertx, String workerId, HeadObjects head, DirectPort port,
      ObjectStore store, String host, PortIdentity identity, RenewableKeys certified,
      X509Certificate clusterCa, boolean clusterTls) {
    this.certified = certified;
    this.clusterCa = clusterCa;
    this.clusterTls = clusterTls;
    this.vertx = vertx;
    this.workerId = workerId;
    this.head = head;
    this.port = port;
    this.host = host;
    this.identity = identity;
    this.client = port == null ? null : new BulkClient(store, null);
  }

  /**
   * @param enabled whether this node takes part (not gRPC only)
   * @param tls how the cluster is dialled: with TLS so does this port, presenting the worker's
   *     own certificate where it has one (else a self-signed one readers pin), and fetches
   *     check the keeper's
   */
  static PeerObjects start(Vertx vertx, WorkerNodeOptions options, HeadObjects head,
      ObjectStore store, boolean enabled, TlsOptions tls) throws Exception {
    String workerId = options.worker().workerId();
    if (!enabled) {
      return new PeerObjects(vertx, workerId, head, null, store, "", null, null, null,
          tls.enabled());
    }
    RenewableKeys certified = tls.enabled() && tls.serves()
        ? new RenewableKeys(vertx, tls.certificate(), tls.privateKey()) : null;
    X509Certificate clusterCa = certified == null || tls.ca() == null ? null : caOf(tls.ca());
    PortIdentity identity = tls.enabled() && certified == null
        ? PortIdentity.generate(workerId) : null;
    String host = towards(options.headHost());
    // Behind NAT, or with several interfaces, the address others reach this host by may not be
    // the one that routes to the head: BULLETIN_DIRECT_HOST names it (the port stays bound to
    // the interface towards the head).
    String announced = System.getenv().getOrDefault("BULLETIN_DIRECT_HOST", "").trim();
    try {
      return new PeerObjects(vertx, workerId, head, DirectPort.start(host, store,
          certified != null ? DataTls.server(certified)
              : identity == null ? null : identity.serverEngines()), store,
          announced.isEmpty() ? host : announced, identity, certified, clusterCa, tls.enabled());
    } catch (IOException e) {
      LOG.warning(e.getMessage() + "; objects this worker keeps go through the head");
      return new PeerObjects(vertx, workerId, head, null, store, "", null, null, null,
          tls.enabled());
    }
  }

  private static X509Certificate caOf(java.nio.file.Path pem) throws Exception {
    try (var in = java.nio.file.Files.newInputStream(pem)) {
      return (X509Certificate) java.security.cert.CertificateFactory.getInstance("X.509")
          .generateCertificate(in);
    }
  }

  /** The worker renewed its certificate: its port presents the new one from now on. */
  void renewed() throws Exception {
    if (certified != null) {
      certified.reload();
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

  /** Announces the port in the registration (port 0: none), and its certificate's pin. */
  RegisterWorker.Builder announce(RegisterWorker.Builder register) {
    if (port == null) {
      return register;
    }
    if (identity != null) {
      register.setDirectTlsFingerprint(ByteString.copyFrom(identity.fingerprint()));
    }
    register.setDirectTlsWorkerCertificate(certified != null);
    return register.setDirectHost(host).setDirectPort(port.port());
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
    TlsEngines tls;
    if (source.getTlsWorkerCertificate() && clusterCa != null) {
      tls = pins.enginesForWorker(clusterCa, source.getKeeper());
    } else if (!source.getTlsFingerprint().isEmpty()) {
      tls = pins.enginesFor(source.getTlsFingerprint().toByteArray());
    } else if (clusterTls) {
      // A TLS cluster's head never names a plaintext keeper; if one did, the ticket and the
      // bytes would cross the network in the clear.
      LOG.warning("worker " + source.getKeeper() + "'s data port comes without a certificate"
          + " pin in a cluster that speaks TLS; fetching " + key + " through the head");
      return head.fetch(key, size);
    } else {
      tls = null;
    }
    byte[] request = DirectTicket.request(workerId, key, source.getTicket().toByteArray());
    return vertx.<ObjectKey>executeBlocking(() -> client.getDirect(address, request, key, tls),
        false)
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
