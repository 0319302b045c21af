package dev.bulletin.runtime.harness;

import dev.bulletin.protocol.BulletinVersion;
import dev.bulletin.protocol.CallEnded;
import dev.bulletin.protocol.CallReturned;
import dev.bulletin.protocol.CallStarted;
import dev.bulletin.protocol.HeadMessage;
import dev.bulletin.protocol.ObjectRef;
import dev.bulletin.protocol.ReadyBatch;
import dev.bulletin.protocol.RegisterWorker;
import dev.bulletin.protocol.WorkerBatch;
import dev.bulletin.protocol.WorkerHeartbeat;
import dev.bulletin.protocol.WorkerMessage;
import io.vertx.core.Vertx;
import io.vertx.core.VertxOptions;
import io.vertx.core.net.SocketAddress;
import io.vertx.grpc.client.GrpcClient;
import io.vertx.grpc.client.GrpcClientRequest;
import io.vertx.grpc.common.GrpcMessageDecoder;
import io.vertx.grpc.common.GrpcMessageEncoder;
import io.vertx.grpc.common.ServiceMethod;
import io.vertx.grpc.common.ServiceName;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A SIMULATION of many remote workers for benchmarks of the runtime (issue 30: "1,000 simulated
 * workers"): each is one Attach stream speaking the real worker protocol with the cluster's
 * worker token (registration, numbered reports, heartbeats), whose simulated GPUs run nothing:
 * every RunCall is answered at once with CallStarted and a CallEnded returning {@code result},
 * what one turn of its loop made leaving as one message as a worker agent's does.
 * No Python, no store, no executor: what is left is the runtime's own cost per call.
 *
 * <p>They run on a Vert.x of one event loop of their own, so their CPU can be told apart from
 * the runtime's ({@link #threadId}). Streams are spread over several gRPC clients: the runtime
 * allows 100 concurrent streams per HTTP/2 connection.
 */
final class SimulatedWorkers implements AutoCloseable {

  private static final ServiceMethod<HeadMessage, WorkerMessage> ATTACH = ServiceMethod.client(
      ServiceName.create("bulletin.v1.Workers"), "Attach", GrpcMessageEncoder.encoder(),
      GrpcMessageDecoder.decoder(HeadMessage.newBuilder()));
  private static final int STREAMS_PER_CLIENT = 50;

  private final Vertx vertx = Vertx.vertx(new VertxOptions().setEventLoopPoolSize(1));
  private final List<GrpcClient> clients = new ArrayList<>();
  private final List<Worker> workers = new ArrayList<>();
  private final ObjectRef result;
  private final AtomicLong calls = new AtomicLong();
  /** Messages the runtime wrote to the workers (a batch is one), and the workers' to it. */
  private final AtomicLong messagesIn = new AtomicLong();
  private final AtomicLong messagesOut = new AtomicLong();
  /** Nanoseconds from a worker's CallEnded to its next RunCall, one per refilled slot. */
  private final List<Long> refills = new ArrayList<>();
  private final long threadId;
  /** The most RunCalls one message from the runtime carried. */
  private int largestRunBatch;
  /** Per worker: the DropResident messages it heard, and the calls it answered. */
  private final Map<String, Integer> dropsHeard = new HashMap<>();
  private final Map<String, Integer> answered = new HashMap<>();
  private final long runMillis;

  /**
   * Attaches {@code count} workers of {@code gpus} simulated GPUs each; returns once the
   * runtime accepted every one.
   */
  SimulatedWorkers(String address, String workerToken, int count, int gpus, ObjectRef result)
      throws Exception {
    this(address, workerToken, count, gpus, result, 0);
  }

  /** As above; each call ends {@code runMillis} after it started (0: at once). */
  SimulatedWorkers(String address, String workerToken, int count, int gpus, ObjectRef result,
      long runMillis) throws Exception {
    this.result = result;
    this.runMillis = runMillis;
    int colon = address.lastIndexOf(':');
    SocketAddress head = SocketAddress.inetSocketAddress(
        Integer.parseInt(address.substring(colon + 1)), address.substring(0, colon));
    CompletableFuture<Long> loop = new CompletableFuture<>();
    vertx.runOnContext(ignored -> loop.complete(Thread.currentThread().getId()));
    threadId = loop.get(30, TimeUnit.SECONDS);
    List<CompletableFuture<Void>> accepted = new ArrayList<>();
    for (int i = 0; i < count; i++) {
      if (i % STREAMS_PER_CLIENT == 0) {
        clients.add(GrpcClient.client(vertx));
      }
      Worker worker = new Worker("sim-" + i, gpus);
      workers.add(worker);
      accepted.add(worker.attach(clients.get(clients.size() - 1), head, workerToken));
    }
    CompletableFuture.allOf(accepted.toArray(CompletableFuture[]::new))
        .get(RuntimeHarness.PATIENCE.toSeconds(), TimeUnit.SECONDS);
  }

  /** The event loop thread every simulated worker runs on. */
  long threadId() {
    return threadId;
  }

  /** Calls answered so far, over all workers. */
  long calls() {
    return calls.get();
  }

  /** Messages between the runtime and the workers so far, both ways (a batch is one). */
  long messages() {
    return messagesIn.get() + messagesOut.get();
  }

  /** The most calls the runtime sent a worker in one message (a HeadBatch, or 1). */
  int largestRunBatch() {
    CompletableFuture<Integer> largest = new CompletableFuture<>();
    vertx.runOnContext(ignored -> largest.complete(largestRunBatch));
    return largest.join();
  }

  /** How many DropResident messages each worker heard (a copy; workers that heard none absent). */
  Map<String, Integer> dropsHeard() {
    CompletableFuture<Map<String, Integer>> copy = new CompletableFuture<>();
    vertx.runOnContext(ignored -> copy.complete(Map.copyOf(dropsHeard)));
    return copy.join();
  }

  /** How many calls each worker answered (a copy; workers that answered none absent). */
  Map<String, Integer> answered() {
    CompletableFuture<Map<String, Integer>> copy = new CompletableFuture<>();
    vertx.runOnContext(ignored -> copy.complete(Map.copyOf(answered)));
    return copy.join();
  }

  /** The refill times recorded so far (a copy), in nanoseconds. */
  List<Long> refills() {
    CompletableFuture<List<Long>> copy = new CompletableFuture<>();
    vertx.runOnContext(ignored -> copy.complete(new ArrayList<>(refills)));
    return copy.join();
  }

  @Override
  public void close() {
    vertx.close().toCompletionStage().toCompletableFuture().join();
  }

  /** One simulated worker: its stream, its report numbers, when it last freed a slot. */
  private final class Worker {
    private final String id;
    private final int gpus;
    private GrpcClientRequest<WorkerMessage, HeadMessage> stream;
    private final ReadyBatch<WorkerMessage> outbox = new ReadyBatch<>(
        task -> vertx.runOnContext(ignored -> task.run()),
        messages -> WorkerMessage.newBuilder().setBatch(WorkerBatch.newBuilder()
            .addAllMessages(messages)).build(),
        message -> {
          messagesOut.incrementAndGet();
          stream.write(message);
        }, (messages, broken) -> { });
    private long nextSeq = 1;
    private long lastEndNanos;

    Worker(String id, int gpus) {
      this.id = id;
      this.gpus = gpus;
    }

    CompletableFuture<Void> attach(GrpcClient client, SocketAddress head, String token) {
      CompletableFuture<Void> accepted = new CompletableFuture<>();
      vertx.runOnContext(ignored -> client.request(head, ATTACH).onFailure(
          accepted::completeExceptionally).onSuccess(request -> {
            stream = request;
            request.headers().set("authorization", "Bearer " + token);
            RegisterWorker.Builder register = RegisterWorker.newBuilder().setWorkerId(id)
                .setHost(id).setSimulatedGpus(true).setCpus(gpus).setMemoryBytes(64L << 30)
                .setVersion(BulletinVersion.get());
            for (int g = 0; g < gpus; g++) {
              register.addGpuNames("Simulated GPU");
            }
            request.write(WorkerMessage.newBuilder().setRegister(register).build());
            request.response().onFailure(accepted::completeExceptionally)
                .onSuccess(response -> response.handler(message -> {
                  messagesIn.incrementAndGet();
                  if (message.hasAccepted()) {
                    long every = Math.max(100,
                        (long) (message.getAccepted().getHeartbeatSeconds() * 1000));
                    vertx.setPeriodic(every, timer -> {
                      messagesOut.incrementAndGet();
                      request.write(WorkerMessage.newBuilder()
                          .setHeartbeat(WorkerHeartbeat.getDefaultInstance()).build());
                    });
                    accepted.complete(null);
                  } else if (message.hasRun()) {
                    largestRunBatch = Math.max(largestRunBatch, 1);
                    answer(message.getRun().getTaskId());
                  } else if (message.hasBatch()) {
                    List<HeadMessage> runs = message.getBatch().getMessagesList().stream()
                        .filter(HeadMessage::hasRun).toList();
                    largestRunBatch = Math.max(largestRunBatch, runs.size());
                    runs.forEach(one -> answer(one.getRun().getTaskId()));
                    message.getBatch().getMessagesList().stream()
                        .filter(HeadMessage::hasDropResident)
                        .forEach(one -> dropsHeard.merge(id, 1, Integer::sum));
                  } else if (message.hasDropResident()) {
                    dropsHeard.merge(id, 1, Integer::sum);
                  }
                }));
          }));
      return accepted;
    }

    private void answer(String taskId) {
      answered.merge(id, 1, Integer::sum);
      long now = System.nanoTime();
      if (lastEndNanos != 0) {
        refills.add(now - lastEndNanos);
      }
      outbox.add(WorkerMessage.newBuilder().setSeq(nextSeq++).setStarted(
          CallStarted.newBuilder().setTaskId(taskId).setExecutorId(id + "-e")).build());
      if (runMillis > 0) {
        vertx.setTimer(runMillis, timer -> end(taskId));
      } else {
        end(taskId);
      }
    }

    private void end(String taskId) {
      outbox.add(WorkerMessage.newBuilder().setSeq(nextSeq++).setEnded(CallEnded.newBuilder()
          .setTaskId(taskId).setReturned(CallReturned.newBuilder().setResult(result))).build());
      lastEndNanos = System.nanoTime();
      calls.incrementAndGet();
    }
  }
}
