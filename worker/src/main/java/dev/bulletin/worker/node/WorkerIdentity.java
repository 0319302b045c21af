package dev.bulletin.worker.node;

import dev.bulletin.protocol.JoinRequest;
import dev.bulletin.protocol.WorkerCertificate;
import dev.bulletin.worker.ProtoCodec;
import dev.bulletin.worker.tls.TlsOptions;
import dev.bulletin.worker.tls.TlsSetup;
import dev.bulletin.worker.tls.WorkerKeys;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.net.SocketAddress;
import io.vertx.grpc.client.GrpcClient;
import io.vertx.grpc.common.GrpcStatus;
import io.vertx.grpc.common.ServiceMethod;
import io.vertx.grpc.common.ServiceName;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.time.Instant;
import java.util.concurrent.TimeUnit;

/**
 * This worker's own certificate (docs/security.md, "A certificate per worker"): the key made
 * here and never sent, exchanged once with a join token for a certificate the cluster CA signs
 * for the token's worker, then renewed over the worker's mutual TLS link before it expires
 * (same key: the runtime lets a link that renewed keep the certificate of its handshake). Key
 * and certificate live in the worker's identity folder, owner-only (0700 folder, 0600 files).
 */
public final class WorkerIdentity {
  static final String KEY_FILE = "worker-key.pem";
  static final String CERTIFICATE_FILE = "worker.pem";
  private static final java.util.logging.Logger LOG =
      java.util.logging.Logger.getLogger(WorkerIdentity.class.getName());
  private static final ServiceName WORKERS = ServiceName.create("bulletin.v1.Workers");
  static final ServiceMethod<WorkerCertificate, JoinRequest> JOIN = method("Join");
  static final ServiceMethod<WorkerCertificate, JoinRequest> RENEW = method("Renew");

  private final WorkerKeys keys;
  private final Path folder;
  private final String workerId;
  private volatile Instant notAfter;

  private WorkerIdentity(WorkerKeys keys, Path folder, String workerId, Instant notAfter) {
    this.keys = keys;
    this.folder = folder;
    this.workerId = workerId;
    this.notAfter = notAfter;
  }

  /**
   * Joins the runtime at {@code head} with {@code token}: a key made here, its certificate
   * written to {@code folder} (null: {@code homeFolder}/workers/ID). Blocks until done.
   *
   * @param expectedId the id the worker was asked to run as, or null: the token's
   * @throws WorkerRefusedException when the runtime refuses the token or cannot be reached
   */
  public static WorkerIdentity join(SocketAddress head, TlsOptions trust, String token,
      String expectedId, Path folder, Path homeFolder) throws Exception {
    if (!trust.enabled()) {
      throw new IllegalArgumentException("a worker joins over TLS only (--tls, --tls-ca): the"
          + " join token and the certificate must not cross the network in the clear");
    }
    WorkerKeys keys = WorkerKeys.generate();
    Vertx vertx = Vertx.vertx();
    WorkerCertificate granted;
    try {
      GrpcClient client = GrpcClient.client(vertx, TlsSetup.dial(trust));
      granted = call(client, head, JOIN, token, keys.csr(expectedId == null ? "worker"
          : expectedId)).toCompletionStage().toCompletableFuture().get(30, TimeUnit.SECONDS);
    } catch (java.util.concurrent.ExecutionException e) {
      throw new WorkerRefusedException("the runtime at " + head + " refused the join: "
          + e.getCause().getMessage());
    } finally {
      vertx.close();
    }
    if (expectedId != null && !expectedId.equals(granted.getWorkerId())) {
      throw new WorkerRefusedException("the join token is for worker " + granted.getWorkerId()
          + ", not " + expectedId + ": start the worker with --worker-id "
          + granted.getWorkerId() + ", or ask for a token for " + expectedId);
    }
    Path into = folder != null ? folder
        : homeFolder.resolve("workers").resolve(granted.getWorkerId());
    Files.createDirectories(into, PosixFilePermissions.asFileAttribute(
        PosixFilePermissions.fromString("rwx------")));
    keys.writePrivateKey(into.resolve(KEY_FILE));
    WorkerIdentity identity = new WorkerIdentity(keys, into, granted.getWorkerId(),
        Instant.ofEpochMilli((long) (granted.getNotAfter() * 1000)));
    identity.store(granted);
    return identity;
  }

  public String workerId() {
    return workerId;
  }

  /** TLS options that present this worker's certificate, trusting {@code trust}'s CA. */
  public TlsOptions tls(TlsOptions trust) {
    return new TlsOptions(true, folder.resolve(CERTIFICATE_FILE), folder.resolve(KEY_FILE),
        trust.ca());
  }

  /** When the runtime should be asked for the next certificate: at two thirds of this one. */
  Duration renewIn(Instant now) {
    long left = Math.max(0, Duration.between(now, notAfter).toMillis());
    return Duration.ofMillis(Math.max(100, left * 2 / 3));
  }

  /**
   * Renews the certificate at two thirds of each one's life, over {@code client} (the worker's
   * mutual TLS link), until {@code stopped}; {@code present} then loads the new one where the
   * worker presents it. A failure is logged and tried again at two thirds of what is left.
   */
  void keepRenewed(Vertx vertx, GrpcClient client, SocketAddress head,
      java.util.function.Supplier<Future<Void>> present,
      java.util.function.BooleanSupplier stopped) {
    vertx.setTimer(renewIn(Instant.now()).toMillis(), id -> {
      if (stopped.getAsBoolean()) {
        return;
      }
      renew(client, head, vertx).compose(renewed -> present.get()).onComplete(done -> {
        if (done.failed()) {
          LOG.warning("worker " + workerId + " could not renew its certificate (tries again): "
              + done.cause().getMessage());
        } else {
          LOG.info(() -> "worker " + workerId + " renewed its certificate, good until "
              + notAfter);
        }
        keepRenewed(vertx, client, head, present, stopped);
      });
    });
  }

  /** Renews the certificate over {@code client} (the worker's mutual TLS link). */
  Future<Void> renew(GrpcClient client, SocketAddress head, Vertx vertx) {
    return call(client, head, RENEW, "", keys.csr(workerId)).compose(granted ->
        vertx.executeBlocking(() -> {
          store(granted);
          notAfter = Instant.ofEpochMilli((long) (granted.getNotAfter() * 1000));
          return null;
        }));
  }

  /** Writes the certificate owner-only, replacing the old one at once (a rename). */
  private void store(WorkerCertificate granted) throws IOException {
    Path temp = folder.resolve(CERTIFICATE_FILE + ".tmp");
    Files.deleteIfExists(temp);
    Files.writeString(Files.createFile(temp, PosixFilePermissions.asFileAttribute(
        PosixFilePermissions.fromString("rw-------"))), granted.getCertificatePem(),
        StandardCharsets.UTF_8, StandardOpenOption.WRITE);
    Files.move(temp, folder.resolve(CERTIFICATE_FILE), StandardCopyOption.ATOMIC_MOVE,
        StandardCopyOption.REPLACE_EXISTING);
  }

  private static Future<WorkerCertificate> call(GrpcClient client, SocketAddress head,
      ServiceMethod<WorkerCertificate, JoinRequest> method, String token, String csr) {
    return client.request(head, method).compose(request -> {
      if (!token.isEmpty()) {
        request.headers().set("authorization", "Bearer " + token);
      }
      return request.send(JoinRequest.newBuilder().setCsrPem(csr).build());
    }).compose(response -> {
      io.vertx.core.Promise<WorkerCertificate> reply = io.vertx.core.Promise.promise();
      response.handler(reply::tryComplete);
      response.endHandler(ignored -> reply.tryFail(new IOException(
          response.status() == GrpcStatus.OK ? "the runtime sent no certificate"
              : response.statusMessage() == null ? String.valueOf(response.status())
              : response.statusMessage())));
      response.exceptionHandler(reply::tryFail);
      return reply.future();
    });
  }

  private static ServiceMethod<WorkerCertificate, JoinRequest> method(String name) {
    return ServiceMethod.client(WORKERS, name, ProtoCodec.encoder(),
        ProtoCodec.decoder(WorkerCertificate.newBuilder()));
  }
}
