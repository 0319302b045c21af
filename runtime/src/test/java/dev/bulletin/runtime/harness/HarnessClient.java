package dev.bulletin.runtime.harness;

import static org.junit.jupiter.api.Assertions.fail;

import com.google.protobuf.Message;
import dev.bulletin.protocol.ClusterStatus;
import dev.bulletin.protocol.HelloReply;
import dev.bulletin.protocol.HelloRequest;
import dev.bulletin.protocol.StatusRequest;
import dev.bulletin.protocol.WireLimits;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.net.SocketAddress;
import io.vertx.grpc.client.GrpcClient;
import io.vertx.grpc.client.GrpcClientOptions;
import io.vertx.grpc.client.GrpcClientRequest;
import io.vertx.grpc.common.GrpcMessageDecoder;
import io.vertx.grpc.common.GrpcMessageEncoder;
import io.vertx.grpc.common.ServiceMethod;
import io.vertx.grpc.common.ServiceName;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;

/**
 * A Java client of the runtime's {@code bulletin.v1.Bulletin} service over a real HTTP/2
 * connection (vertx-grpc-client with the protocol module's message classes), authenticated
 * with one token. Blocking methods, for tests; they wait at most {@link RuntimeHarness#PATIENCE}.
 */
public final class HarnessClient implements AutoCloseable {

  static final ServiceName SERVICE = ServiceName.create("bulletin.v1.Bulletin");

  private final Vertx vertx;
  /** Whether {@link #close} closes the Vert.x too (not when several clients share one). */
  private final boolean ownsVertx;
  private final GrpcClient client;
  private final SocketAddress server;
  private final String token;

  HarnessClient(String host, int port, String token) {
    this(Vertx.vertx(), true, host, port, token);
  }

  /**
   * A client on a Vert.x that others share (a benchmark's many users: a Vert.x each would be
   * thousands of threads); closing it leaves {@code vertx} open.
   */
  HarnessClient(Vertx vertx, String host, int port, String token) {
    this(vertx, false, host, port, token);
  }

  private HarnessClient(Vertx vertx, boolean ownsVertx, String host, int port, String token) {
    this.vertx = vertx;
    this.ownsVertx = ownsVertx;
    this.client = GrpcClient.client(vertx,
        new GrpcClientOptions().setMaxMessageSize(WireLimits.MAX_MESSAGE_BYTES));
    this.server = SocketAddress.inetSocketAddress(port, host);
    this.token = token;
  }

  static <Resp, Req extends com.google.protobuf.MessageLite> ServiceMethod<Resp, Req> method(
      String name, Message.Builder response) {
    return ServiceMethod.client(SERVICE, name, GrpcMessageEncoder.encoder(),
        GrpcMessageDecoder.decoder(response));
  }

  /** The client's own Vert.x (benchmarks tell its threads from the runtime's). */
  Vertx vertx() {
    return vertx;
  }

  public HelloReply hello() {
    return call(method("Hello", HelloReply.newBuilder()), HelloRequest.newBuilder()
        .setClientVersion("harness").build(), Map.of());
  }

  public ClusterStatus status() {
    return call(method("Status", ClusterStatus.newBuilder()), StatusRequest.getDefaultInstance(),
        Map.of());
  }

  /** Polls Status until it satisfies {@code condition}; fails naming {@code what} otherwise. */
  public ClusterStatus awaitStatus(Predicate<ClusterStatus> condition, String what)
      throws InterruptedException {
    long deadline = System.nanoTime() + RuntimeHarness.PATIENCE.toNanos();
    ClusterStatus status = status();
    while (!condition.test(status)) {
      if (System.nanoTime() > deadline) {
        fail("the cluster's status never showed " + what + "; last status:\n" + status);
      }
      Thread.sleep(50);
      status = status();
    }
    return status;
  }

  /** Opens a Session stream; returns once the runtime named the session. */
  public HarnessSession openSession() {
    return new HarnessSession(this);
  }

  /** One unary call; a status other than OK throws. */
  <Req, Resp> Resp call(ServiceMethod<Resp, Req> method, Req message, Map<String, String> headers) {
    return await(callAsync(method, message, headers));
  }

  /** One unary call, not waited for: its reply, or its failure. */
  <Req, Resp> Future<Resp> callAsync(ServiceMethod<Resp, Req> method, Req message,
      Map<String, String> headers) {
    return client.request(server, method).compose(request -> {
      authorize(request, headers);
      return request.send(message);
    }).compose(response -> response.last());
  }

  <Req, Resp> Future<GrpcClientRequest<Req, Resp>> request(ServiceMethod<Resp, Req> method,
      Map<String, String> headers) {
    return client.request(server, method).map(request -> {
      authorize(request, headers);
      return request;
    });
  }

  private void authorize(GrpcClientRequest<?, ?> request, Map<String, String> headers) {
    request.headers().set("authorization", "Bearer " + token);
    headers.forEach((name, value) -> request.headers().set(name, value));
  }

  /** Waits for a Vert.x future from the test's thread (never an event loop). */
  static <T> T await(Future<T> future) {
    try {
      return future.toCompletionStage().toCompletableFuture()
          .get(RuntimeHarness.PATIENCE.toMillis(), TimeUnit.MILLISECONDS);
    } catch (java.util.concurrent.ExecutionException e) {
      throw e.getCause() instanceof RuntimeException runtime ? runtime
          : new IllegalStateException(e.getCause());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    } catch (java.util.concurrent.TimeoutException e) {
      throw new AssertionError("no answer from the runtime within " + RuntimeHarness.PATIENCE, e);
    }
  }

  @Override
  public void close() {
    if (ownsVertx) {
      client.close();
      await(vertx.close());
    } else {
      await(client.close());
    }
  }
}
