package dev.bulletin.worker.node;

import dev.bulletin.protocol.HeadMessage;
import dev.bulletin.protocol.ReadyBatch;
import dev.bulletin.protocol.RegisterWorker;
import dev.bulletin.protocol.WorkerAccepted;
import dev.bulletin.protocol.WorkerBatch;
import dev.bulletin.protocol.WorkerMessage;
import dev.bulletin.worker.ProtoCodec;
import dev.bulletin.worker.tls.TlsOptions;
import io.vertx.core.Vertx;
import io.vertx.core.net.SocketAddress;
import io.vertx.grpc.client.GrpcClient;
import io.vertx.grpc.client.GrpcClientRequest;
import io.vertx.grpc.common.GrpcStatus;
import io.vertx.grpc.common.ServiceMethod;
import io.vertx.grpc.common.ServiceName;
import java.util.ArrayDeque;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;
import java.util.logging.Logger;

/**
 * A worker node's Attach stream to the runtime, kept up (docs/durability.md, "Reconnecting
 * clients and workers"). The first attach must succeed at once (a wrong address or token is
 * the user's to fix); once accepted, a broken link is dialled again with backoff for the
 * node's reconnect timeout, the worker registering again with {@code reattach} and what it
 * runs and holds, while its calls run on and what they report waits here (their ends always;
 * their output up to a bound). Past the timeout, or when the runtime refuses it, the node
 * stops. Used on the node's event loop only.
 */
final class HeadLink {
  private static final Logger LOG = Logger.getLogger(HeadLink.class.getName());
  private static final ServiceMethod<HeadMessage, WorkerMessage> ATTACH = ServiceMethod.client(
      ServiceName.create("bulletin.v1.Workers"), "Attach", ProtoCodec.encoder(),
      ProtoCodec.decoder(HeadMessage.newBuilder()));
  private static final long FIRST_DELAY_MILLIS = 100;
  private static final long MAX_DELAY_MILLIS = 3_000;
  /** Output kept until the runtime says it got it; calls' ends are always kept. */
  private static final long KEPT_OUTPUT_BYTES = 16L << 20;

  private final Vertx vertx;
  private final GrpcClient client;
  private final WorkerNodeOptions options;
  private final TlsOptions tls;
  private final SocketAddress head;
  /** The registration; on a reattach, completed with what the node runs and holds. */
  private final java.util.function.Function<RegisterWorker.Builder, RegisterWorker> registration;
  private final Consumer<HeadMessage> onHead;
  private final Consumer<String> onEnd;
  private final CompletableFuture<WorkerAccepted> accepted = new CompletableFuture<>();
  private GrpcClientRequest<WorkerMessage, HeadMessage> stream;
  /**
   * Reports sent or to send that the runtime has not said it got, in seq order: a write into a
   * link that is breaking succeeds here and is lost there, so only the runtime's word counts.
   */
  private final ArrayDeque<WorkerMessage> unreceived = new ArrayDeque<>();
  /**
   * What leaves for the runtime in this turn of the node's loop: one message, or one batch
   * (calls that end together report together). A write that fails loses nothing: every report
   * waits in {@link #unreceived} until the runtime says it got it.
   */
  private final ReadyBatch<WorkerMessage> outbox;
  private long nextSeq = 1;
  private long keptOutputBytes;
  private long droppedOutputBytes;
  private long reconnectDeadline;
  private long delay = FIRST_DELAY_MILLIS;
  private boolean reconnecting;
  private boolean closed;
  /** Numbers each dial: only the current stream's (or attempt's) failures count. */
  private long generation;

  HeadLink(Vertx vertx, GrpcClient client, WorkerNodeOptions options, TlsOptions tls,
      java.util.function.Function<RegisterWorker.Builder, RegisterWorker> registration, Consumer<HeadMessage> onHead,
      Consumer<String> onEnd) {
    this.vertx = vertx;
    this.client = client;
    this.options = options;
    this.tls = tls;
    this.head = SocketAddress.inetSocketAddress(options.headPort(), options.headHost());
    this.registration = registration;
    this.onHead = onHead;
    this.onEnd = onEnd;
    this.outbox = new ReadyBatch<>(task -> vertx.runOnContext(ignored -> task.run()),
        messages -> WorkerMessage.newBuilder().setBatch(WorkerBatch.newBuilder()
            .addAllMessages(messages)).build(),
        message -> {
          if (stream != null && !reconnecting) { // else a reattach sends the reports again
            stream.write(message);
          }
        }, (messages, streamGone) -> lost("lost the runtime"));
  }

  /** Completes when the runtime first accepted the worker; fails if it refused or is away. */
  CompletableFuture<WorkerAccepted> accepted() {
    return accepted;
  }

  void attach() {
    dial(false);
  }

  private void dial(boolean reattach) {
    long gen = ++generation;
    client.request(head, ATTACH).onFailure(error -> broke(gen, error, "cannot reach the runtime"))
        .onSuccess(request -> {
          if (!options.token().isEmpty()) { // else the worker's certificate says who it is
            request.headers().set("authorization", "Bearer " + options.token());
          }
          RegisterWorker.Builder register = RegisterWorker.newBuilder();
          if (reattach) {
            register.setReattach(true);
            unreceived.forEach(message -> {
              if (message.hasEnded()) { // ended here, not yet reported: still the node's
                register.addRunningTaskIds(message.getEnded().getTaskId());
              }
            });
          }
          request.write(WorkerMessage.newBuilder().setRegister(registration.apply(register))
              .build());
          request.response().onFailure(error -> broke(gen, error, "lost the runtime"))
              .onSuccess(response -> {
                response.handler(message -> onMessage(request, message));
                response.exceptionHandler(error -> broke(gen, error, "lost the runtime"));
                response.endHandler(ignored -> ended(gen, response.status(),
                    response.statusMessage()));
              });
        });
  }

  private void onMessage(GrpcClientRequest<WorkerMessage, HeadMessage> request,
      HeadMessage message) {
    if (message.hasAccepted()) {
      stream = request;
      boolean again = reconnecting;
      reconnecting = false;
      delay = FIRST_DELAY_MILLIS;
      onHead.accept(message);
      if (again) {
        received(message.getAccepted().getReceivedSeq());
        sendUnreceived();
        LOG.info(() -> "worker " + options.worker().workerId() + " reattached to the runtime at "
            + options.headAddress());
      }
      accepted.complete(message.getAccepted());
    } else if (request != stream) {
      return; // a stream the link left already
    } else if (message.hasReceived()) {
      received(message.getReceived().getSeq());
    } else if (message.hasBatch()) {
      for (HeadMessage one : message.getBatch().getMessagesList()) {
        if (!one.hasBatch() && !one.hasAccepted()) { // neither comes inside a batch
          onMessage(request, one);
        }
      }
    } else {
      onHead.accept(message);
    }
  }

  /** The stream ended: a refusal (before acceptance, or of a reattach) stops the node. */
  private void ended(long gen, GrpcStatus status, String message) {
    String why = status == GrpcStatus.OK ? "the runtime ended the stream"
        : status.name() + ": " + message;
    boolean linkTrouble = status == GrpcStatus.UNAVAILABLE || status == GrpcStatus.CANCELLED
        || status == GrpcStatus.UNKNOWN || status == GrpcStatus.INTERNAL;
    if (!accepted.isDone()) {
      fail(new WorkerRefusedException("the runtime at " + options.headAddress()
          + " refused this worker: " + why), why);
    } else if (gen != generation) {
      return; // a stream the link left already
    } else if (linkTrouble) {
      lost("the runtime ended its stream (" + why + ")");
    } else if (status == GrpcStatus.OK) {
      end("the runtime at " + options.headAddress() + " ended the stream");
    } else {
      end("the runtime at " + options.headAddress() + " refused it: " + why);
    }
  }

  private void broke(long gen, Throwable error, String what) {
    if (gen != generation) {
      return; // a stream the link left already
    }
    if (!accepted.isDone()) {
      fail(new WorkerRefusedException("cannot reach the runtime at " + options.headAddress()
          + ": " + error.getMessage() + tlsAdvice(error)), what);
      return;
    }
    lost(what + ": " + error.getMessage());
  }

  private void fail(WorkerRefusedException error, String why) {
    accepted.completeExceptionally(error);
    end(why);
  }

  /** The link broke after the worker was accepted: dial again until the timeout. */
  private void lost(String why) {
    if (closed) {
      return;
    }
    if (!reconnecting) {
      if (options.reconnectTimeout().isZero()) {
        end(why);
        return;
      }
      reconnecting = true;
      stream = null;
      outbox.drain(); // kept in unreceived: the reattach sends them again
      reconnectDeadline = System.nanoTime() + options.reconnectTimeout().toNanos();
      LOG.warning("worker " + options.worker().workerId() + " " + why + "; its calls run on,"
          + " and it tries to reattach for " + options.reconnectTimeout().toSeconds() + " s");
    }
    if (System.nanoTime() >= reconnectDeadline) {
      end("the runtime at " + options.headAddress() + " did not come back within "
          + options.reconnectTimeout().toSeconds() + " s (--reconnect-timeout)");
      return;
    }
    generation++; // the broken stream's further reports are stale from here
    long wait = delay;
    delay = Math.min(delay * 2, MAX_DELAY_MILLIS);
    vertx.setTimer(wait, id -> {
      if (reconnecting && !closed) {
        dial(true);
      }
    });
  }

  private void end(String why) {
    if (!closed) {
      closed = true;
      onEnd.accept(why);
    }
  }

  /**
   * Sends to the runtime. A report (anything but a heartbeat) gets the next seq and is kept
   * until the runtime says it got it; while the link is down it only waits.
   */
  void send(WorkerMessage message) {
    if (closed) {
      return;
    }
    if (!message.hasHeartbeat()) {
      message = message.toBuilder().setSeq(nextSeq++).build();
      keep(message);
    }
    if (stream != null && !reconnecting) {
      outbox.add(message);
    }
  }

  private void keep(WorkerMessage report) {
    unreceived.addLast(report);
    if (report.hasOutput()) {
      keptOutputBytes += report.getOutput().getOutput().getData().size();
      if (keptOutputBytes > KEPT_OUTPUT_BYTES) {
        dropOldestOutput();
      }
    }
  }

  /** Past the bound, the oldest output goes: sent already if the link is up, lost if not. */
  private void dropOldestOutput() {
    for (var it = unreceived.iterator(); it.hasNext() && keptOutputBytes > KEPT_OUTPUT_BYTES; ) {
      WorkerMessage report = it.next();
      if (report.hasOutput()) {
        int size = report.getOutput().getOutput().getData().size();
        keptOutputBytes -= size;
        if (reconnecting) {
          droppedOutputBytes += size;
        }
        it.remove();
      }
    }
  }

  /** The runtime got every report up to {@code seq}. */
  private void received(long seq) {
    while (!unreceived.isEmpty() && unreceived.peekFirst().getSeq() <= seq) {
      WorkerMessage report = unreceived.removeFirst();
      if (report.hasOutput()) {
        keptOutputBytes -= report.getOutput().getOutput().getData().size();
      }
    }
  }

  /** After a reattach: every report the runtime did not get, again and in order. */
  private void sendUnreceived() {
    for (WorkerMessage report : List.copyOf(unreceived)) {
      if (stream == null || reconnecting) {
        return;
      }
      try {
        stream.write(report);
      } catch (IllegalStateException streamGone) {
        lost("lost the runtime");
      }
    }
    if (droppedOutputBytes > 0) {
      long dropped = droppedOutputBytes;
      droppedOutputBytes = 0;
      LOG.warning("worker " + options.worker().workerId() + " dropped " + dropped + " bytes of"
          + " its calls' output while the runtime was away");
    }
  }

  /**
   * Ends the stream as a goodbye: the runtime takes the worker as gone at once (its calls
   * requeued now), where a reset would be a lost link that it holds through its grace.
   */
  void close() {
    closed = true;
    if (stream != null) {
      try {
        stream.end();
      } catch (IllegalStateException alreadyGone) {
        stream.cancel();
      }
    }
  }

  /** What to do when the failure was TLS: which CA the worker trusted, and where to get it. */
  private String tlsAdvice(Throwable error) {
    Throwable handshake = null; // the innermost TLS failure says most (e.g. "PKIX path ...")
    for (Throwable cause = error; cause != null; cause = cause.getCause()) {
      handshake = cause instanceof javax.net.ssl.SSLException ? cause : handshake;
    }
    if (!tls.enabled()) {
      return ". If the runtime speaks TLS (`bulletin up --tls`, or --host not loopback), give"
          + " the worker its CA: BULLETIN_CA=<copy of the head's $BULLETIN_HOME/ca.pem>";
    }
    if (handshake == null) {
      return "";
    }
    return ". The TLS handshake failed (" + handshake.getMessage() + "): the worker checked the runtime's certificate against "
        + (tls.ca() != null ? "the CA " + tls.ca() : "the JDK's trusted CAs") + " and the name "
        + options.headHost() + ". Use the cluster's CA: copy $BULLETIN_HOME/ca.pem from the head"
        + " and set BULLETIN_CA to it (or give --tls-ca)";
  }
}
