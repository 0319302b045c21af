package dev.bulletin.runtime.workers;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.Message;
import dev.bulletin.protocol.ClusterStatus;
import dev.bulletin.protocol.IssueJoinTokenReply;
import dev.bulletin.protocol.IssueJoinTokenRequest;
import dev.bulletin.protocol.RevokeWorkerReply;
import dev.bulletin.protocol.RevokeWorkerRequest;
import dev.bulletin.protocol.StatusRequest;
import dev.bulletin.runtime.BulletinRuntime;
import dev.bulletin.runtime.RuntimeOptions;
import dev.bulletin.runtime.harness.PythonCalls;
import dev.bulletin.runtime.harness.RuntimeHarness;
import dev.bulletin.runtime.identity.WorkerIdentityOptions;
import dev.bulletin.worker.GpuInventory;
import dev.bulletin.worker.WorkerOptions;
import dev.bulletin.worker.node.WorkerIdentity;
import dev.bulletin.worker.node.WorkerNode;
import dev.bulletin.worker.node.WorkerNodeOptions;
import dev.bulletin.worker.node.WorkerRefusedException;
import dev.bulletin.worker.tls.TlsSetup;
import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import io.vertx.core.net.SocketAddress;
import io.vertx.grpc.client.GrpcClient;
import io.vertx.grpc.common.GrpcMessageDecoder;
import io.vertx.grpc.common.GrpcMessageEncoder;
import io.vertx.grpc.common.ServiceMethod;
import io.vertx.grpc.common.ServiceName;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Each worker its own certificate (docs/security.md), for real: a TLS runtime holding the
 * cluster CA's key, worker nodes that join with single-use tokens and attach over mutual TLS
 * on loopback, the owner's token RPCs, revocation (also across a restart) and renewal.
 */
@Timeout(180)
class WorkerIdentityTest {
  private static final String WORKER_TOKEN = "shared-worker-token-0123456789";
  private static final String USER_TOKEN = "user-token-bob-0123456789";

  @TempDir Path home;
  private final Vertx vertx = Vertx.vertx();
  private ClusterCa ca;
  private BulletinRuntime runtime;
  private WorkerNode node;

  @AfterEach
  void stop() {
    if (node != null) {
      node.close();
    }
    if (runtime != null) {
      runtime.close();
    }
    vertx.close();
  }

  private void startRuntime(Duration certificateLifetime) throws Exception {
    if (ca == null) {
      ca = ClusterCa.make(home.resolve("tls"));
    }
    WorkerOptions embedded = new WorkerOptions("head", PythonCalls.python(),
        GpuInventory.simulated(0), 1, 1L << 30, 0, 60_000, 0, 60_000, Map.of());
    RuntimeOptions options = RuntimeOptions.builder(home, embedded)
        .owner(RuntimeHarness.OWNER_TOKEN, RuntimeHarness.OWNER).workerToken(WORKER_TOKEN)
        .config(RuntimeHarness.config(home, "users:\n  - {name: bob, group: g, token: \""
            + USER_TOKEN + "\"}\n"))
        .storeFolder(home.resolve("store")).spillFolder(home.resolve("spill")).httpPort(-1)
        .workerIdentity(new WorkerIdentityOptions(ca.caKey(), certificateLifetime)).build();
    runtime = BulletinRuntime.start(options, ca.server(), () -> { });
  }

  private SocketAddress head() {
    return SocketAddress.inetSocketAddress(Integer.parseInt(
        runtime.address().substring(runtime.address().lastIndexOf(':') + 1)), "127.0.0.1");
  }

  private String joinToken(String workerId, double ttlSeconds) throws Exception {
    return ((IssueJoinTokenReply) unary(RuntimeHarness.OWNER_TOKEN, "IssueJoinToken",
        IssueJoinTokenRequest.newBuilder().setWorkerId(workerId).setTtlSeconds(ttlSeconds)
            .build(), IssueJoinTokenReply.newBuilder())).getToken();
  }

  private WorkerIdentity join(String token, String workerId) throws Exception {
    return WorkerIdentity.join(head(), ca.client(), token, workerId, null, home);
  }

  private WorkerNodeOptions nodeOptions(String workerId, String token) {
    return new WorkerNodeOptions("127.0.0.1", head().port(), token, "",
        new WorkerOptions(workerId, PythonCalls.python(), GpuInventory.simulated(0), 1,
            1L << 30, 0, 60_000, 0, 60_000, Map.of()),
        "localhost", 0, "", home.resolve("store-" + workerId), runtimeVersion(), false,
        Duration.ZERO);
  }

  private static String runtimeVersion() {
    return dev.bulletin.protocol.BulletinVersion.get();
  }

  private boolean listed(String workerId) throws Exception {
    ClusterStatus status = (ClusterStatus) unary(RuntimeHarness.OWNER_TOKEN, "Status",
        StatusRequest.getDefaultInstance(), ClusterStatus.newBuilder());
    return status.getWorkersList().stream().anyMatch(w -> w.getWorkerId().equals(workerId));
  }

  @Test
  void aWorkerJoinsOnceAndAttachesWithItsOwnCertificate() throws Exception {
    startRuntime(Duration.ofHours(1));
    String token = joinToken("w1", 0);
    WorkerIdentity identity = join(token, null);
    assertEquals("w1", identity.workerId());
    Path folder = home.resolve("workers").resolve("w1");
    for (String file : new String[] {"worker.pem", "worker-key.pem"}) {
      assertEquals("rw-------", PosixFilePermissions.toString(
          Files.getPosixFilePermissions(folder.resolve(file))), file);
    }
    WorkerRefusedException again = assertThrows(WorkerRefusedException.class,
        () -> join(token, null));
    assertTrue(again.getMessage().contains("already used"), again.getMessage());
    node = WorkerNode.start(nodeOptions("w1", ""), ca.client(), identity);
    assertTrue(listed("w1"));
  }

  @Test
  void anExpiredOrMalformedJoinTokenIsRefused() throws Exception {
    startRuntime(Duration.ofHours(1));
    String token = joinToken("w2", 0.001);
    Thread.sleep(50); // past its lifetime: what is tested is the refusal, not a duration
    WorkerRefusedException expired = assertThrows(WorkerRefusedException.class,
        () -> join(token, null));
    assertTrue(expired.getMessage().contains("expired join token"), expired.getMessage());
    WorkerRefusedException malformed = assertThrows(WorkerRefusedException.class,
        () -> join("not-a-token", null));
    assertTrue(malformed.getMessage().contains("not a join token"), malformed.getMessage());
  }

  @Test
  void onlyTheOwnerMintsTokensAndRevokes() throws Exception {
    startRuntime(Duration.ofHours(1));
    String denied = failure(USER_TOKEN, "IssueJoinToken",
        IssueJoinTokenRequest.newBuilder().setWorkerId("w3").build());
    assertTrue(denied.startsWith("PERMISSION_DENIED") && denied.contains("only the cluster's"
        + " owner issues join tokens"), denied);
    denied = failure(USER_TOKEN, "RevokeWorker",
        RevokeWorkerRequest.newBuilder().setWorkerId("w3").build());
    assertTrue(denied.startsWith("PERMISSION_DENIED"), denied);
    String unknown = failure(RuntimeHarness.OWNER_TOKEN, "RevokeWorker",
        RevokeWorkerRequest.newBuilder().setWorkerId("nobody").build());
    assertTrue(unknown.startsWith("NOT_FOUND") && unknown.contains("'nobody'"), unknown);
  }

  @Test
  void aCertificateForOneWorkerCannotAttachAsAnother() throws Exception {
    startRuntime(Duration.ofHours(1));
    WorkerIdentity a = join(joinToken("a", 0), null);
    WorkerRefusedException refused = assertThrows(WorkerRefusedException.class,
        () -> WorkerNode.start(nodeOptions("b", ""), ca.client(), a));
    assertTrue(refused.getMessage().contains("the certificate is worker a's, not b's"),
        refused.getMessage());
    assertFalse(listed("b"));
  }

  @Test
  void theSharedWorkerTokenNoLongerAttachesUnderTls() throws Exception {
    startRuntime(Duration.ofHours(1));
    WorkerRefusedException refused = assertThrows(WorkerRefusedException.class,
        () -> WorkerNode.start(nodeOptions("old", WORKER_TOKEN), ca.client()));
    assertTrue(refused.getMessage().contains("bulletin worker join-token"),
        refused.getMessage());
  }

  @Test
  void aRevokedWorkerIsCutOffAndStaysRefusedAfterARestart() throws Exception {
    startRuntime(Duration.ofHours(1));
    WorkerIdentity identity = join(joinToken("r1", 0), null);
    node = WorkerNode.start(nodeOptions("r1", ""), ca.client(), identity);
    RevokeWorkerReply reply = (RevokeWorkerReply) unary(RuntimeHarness.OWNER_TOKEN,
        "RevokeWorker", RevokeWorkerRequest.newBuilder().setWorkerId("r1").build(),
        RevokeWorkerReply.newBuilder());
    assertTrue(reply.getWasAttached());
    node.ended().get(30, TimeUnit.SECONDS); // its link was closed
    node.close();
    node = null;
    assertFalse(listed("r1"));
    assertThrows(WorkerRefusedException.class,
        () -> WorkerNode.start(nodeOptions("r1", ""), ca.client(), identity));
    String noToken = failure(RuntimeHarness.OWNER_TOKEN, "IssueJoinToken",
        IssueJoinTokenRequest.newBuilder().setWorkerId("r1").build());
    assertTrue(noToken.contains("revoked"), noToken);

    runtime.close();
    startRuntime(Duration.ofHours(1));
    WorkerRefusedException refused = assertThrows(WorkerRefusedException.class,
        () -> WorkerNode.start(nodeOptions("r1", ""), ca.client(), identity));
    assertTrue(refused.getMessage().contains("revoked"), refused.getMessage());
  }

  @Test
  void aRunningWorkerRenewsItsCertificateAndStaysAttached() throws Exception {
    startRuntime(Duration.ofSeconds(4));
    WorkerIdentity identity = join(joinToken("n1", 0), null);
    byte[] first = Files.readAllBytes(home.resolve("workers/n1/worker.pem"));
    node = WorkerNode.start(nodeOptions("n1", ""), ca.client(), identity);
    // Past the first certificate's end (4 s): the runtime ends the link of a worker with no
    // valid certificate, so still being listed means the renewal took.
    Thread.sleep(7_000);
    assertFalse(node.ended().isDone(), () -> node.ended().getNow(""));
    assertTrue(listed("n1"));
    assertFalse(java.util.Arrays.equals(first,
        Files.readAllBytes(home.resolve("workers/n1/worker.pem"))));
  }

  // ---- the owner's (or a user's) unary calls ------------------------------------------------

  private Message unary(String token, String method, Message request, Message.Builder reply)
      throws Exception {
    Promise<Message> answer = Promise.promise();
    call(token, method, request, reply, answer);
    return answer.future().toCompletionStage().toCompletableFuture().get(30, TimeUnit.SECONDS);
  }

  /** The status and message of a call that must fail. */
  private String failure(String token, String method, Message request) throws Exception {
    Promise<Message> answer = Promise.promise();
    call(token, method, request, RevokeWorkerReply.newBuilder(), answer);
    try {
      answer.future().toCompletionStage().toCompletableFuture().get(30, TimeUnit.SECONDS);
    } catch (java.util.concurrent.ExecutionException e) {
      return e.getCause().getMessage();
    }
    throw new AssertionError(method + " succeeded");
  }

  private void call(String token, String method, Message request, Message.Builder reply,
      Promise<Message> answer) {
    GrpcClient client = GrpcClient.client(vertx, TlsSetup.dial(ca.client()));
    ServiceMethod<Message, Message> rpc = ServiceMethod.client(
        ServiceName.create("bulletin.v1.Bulletin"), method, GrpcMessageEncoder.encoder(),
        GrpcMessageDecoder.decoder(reply));
    client.request(head(), rpc).compose(r -> {
      r.headers().set("authorization", "Bearer " + token);
      return r.send(request);
    }).onSuccess(response -> {
      response.handler(answer::tryComplete);
      response.endHandler(ignored -> answer.tryFail(response.status().name() + " "
          + response.statusMessage()));
    }).onFailure(answer::tryFail);
    answer.future().onComplete(done -> client.close());
  }
}
