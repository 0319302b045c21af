package dev.bulletin.worker.node;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.protocol.CallEnded;
import dev.bulletin.protocol.ReportsReceived;
import dev.bulletin.protocol.HeadMessage;
import dev.bulletin.protocol.WorkerAccepted;
import dev.bulletin.protocol.WorkerMessage;
import dev.bulletin.worker.GpuInventory;
import dev.bulletin.worker.WorkerOptions;
import dev.bulletin.worker.tls.TlsOptions;
import io.vertx.core.Context;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.HttpServerOptions;
import io.vertx.grpc.client.GrpcClient;
import io.vertx.grpc.common.GrpcMessageDecoder;
import io.vertx.grpc.common.GrpcMessageEncoder;
import io.vertx.grpc.common.GrpcStatus;
import io.vertx.grpc.common.ServiceMethod;
import io.vertx.grpc.common.ServiceName;
import io.vertx.grpc.server.GrpcServer;
import io.vertx.grpc.server.GrpcServerResponse;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A call's end that the worker wrote to its stream is kept until the runtime acknowledges it
 * (docs/durability.md), which a runtime does once its journal has it: a runtime that dies with
 * the end in flight, or before its journal had it on disk, hears it again when the worker
 * reattaches, named among the calls the worker reports (a restored runtime adopts such calls).
 * A real Attach server on loopback stands in for the runtime.
 */
class HeadLinkTest {

  /** One Attach stream as the server sees it. */
  private record Stream(GrpcServerResponse<WorkerMessage, HeadMessage> response,
      List<WorkerMessage> received) {
    boolean got(Predicate<WorkerMessage> which) {
      return received.stream().anyMatch(which);
    }
  }

  @TempDir Path folder;
  private Vertx vertx;
  private HttpServer server;
  private final BlockingQueue<Stream> streams = new LinkedBlockingQueue<>();
  private Context loop;
  private HeadLink link;

  @BeforeEach
  void setUp() throws Exception {
    vertx = Vertx.vertx();
    GrpcServer grpc = GrpcServer.server(vertx);
    ServiceMethod<WorkerMessage, HeadMessage> attach = ServiceMethod.server(
        ServiceName.create("bulletin.v1.Workers"), "Attach", GrpcMessageEncoder.encoder(),
        GrpcMessageDecoder.decoder(WorkerMessage.newBuilder()));
    grpc.callHandler(attach, request -> {
          Stream stream = new Stream(request.response(), new CopyOnWriteArrayList<>());
          request.handler(message -> {
            stream.received().add(message);
            if (message.hasRegister()) {
              request.response().write(HeadMessage.newBuilder().setAccepted(
                  WorkerAccepted.newBuilder().setWorkerId("w1").setHeartbeatSeconds(60)).build());
              streams.add(stream);
            }
          });
        });
    server = vertx.createHttpServer(new HttpServerOptions().setHost("127.0.0.1").setPort(0))
        .requestHandler(grpc).listen().await();
    WorkerNodeOptions options = new WorkerNodeOptions("127.0.0.1", server.actualPort(),
        "worker-token", "", new WorkerOptions("w1", Path.of("python3"),
            GpuInventory.simulated(0), 1, 0, 0, 1000, 0, 1000, Map.of()),
        "host", 0, "", folder, "test", false, Duration.ofSeconds(30));
    loop = vertx.getOrCreateContext();
    link = new HeadLink(vertx, GrpcClient.client(vertx), options, TlsOptions.plain(),
        register -> register.setWorkerId("w1").build(), message -> { }, why -> { });
    loop.runOnContext(ignored -> link.attach());
    link.accepted().get(30, TimeUnit.SECONDS);
  }

  @AfterEach
  void tearDown() {
    vertx.close().await();
  }

  private Stream next() throws InterruptedException {
    Stream stream = streams.poll(30, TimeUnit.SECONDS);
    assertTrue(stream != null, "the worker did not (re)attach within 30 s");
    return stream;
  }

  /** The runtime's end of the stream breaks (as when it is killed). */
  private void breakStream(Stream stream) {
    loop.runOnContext(ignored -> stream.response().status(GrpcStatus.UNAVAILABLE).end());
  }

  private static boolean endOf(WorkerMessage message, String taskId) {
    return message.hasEnded() && message.getEnded().getTaskId().equals(taskId);
  }

  private static void eventually(java.util.function.BooleanSupplier condition) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (!condition.getAsBoolean()) {
      assertTrue(System.nanoTime() < deadline, "condition not met within 20 s");
      Thread.sleep(20);
    }
  }

  @Test
  void anEndIsReportedAndSentAgainOnReattachUntilTheRuntimeAcknowledgesIt() throws Exception {
    Stream first = next();
    loop.runOnContext(ignored -> link.send(WorkerMessage.newBuilder().setEnded(
        CallEnded.newBuilder().setTaskId("t1").setStopped("done")).build()));
    eventually(() -> first.got(message -> endOf(message, "t1")));

    // The runtime dies before it acknowledged the end: the worker names and resends it.
    breakStream(first);
    Stream second = next();
    WorkerMessage register = second.received().get(0);
    assertTrue(register.getRegister().getReattach());
    assertEquals(List.of("t1"), register.getRegister().getRunningTaskIdsList());
    eventually(() -> second.got(message -> endOf(message, "t1")));

    // Acknowledged now: the next reattach no longer carries it.
    long seq = second.received().stream().filter(message -> endOf(message, "t1")).findFirst()
        .orElseThrow().getSeq();
    loop.runOnContext(ignored -> second.response().write(HeadMessage.newBuilder()
        .setReceived(ReportsReceived.newBuilder().setSeq(seq)).build()));
    Thread.sleep(300);
    breakStream(second);
    Stream third = next();
    assertEquals(List.of(), third.received().get(0).getRegister().getRunningTaskIdsList());
    Thread.sleep(300);
    assertFalse(third.got(message -> endOf(message, "t1")), "an acknowledged end is not resent");
  }
}
