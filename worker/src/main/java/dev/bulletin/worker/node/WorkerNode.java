package dev.bulletin.worker.node;

import com.google.protobuf.ByteString;
import dev.bulletin.bridge.ObjectId;
import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.bridge.ObjectStores;
import dev.bulletin.protocol.CallEnded;
import dev.bulletin.protocol.CallOutput;
import dev.bulletin.protocol.CallReturned;
import dev.bulletin.protocol.CallStarted;
import dev.bulletin.protocol.HeadMessage;
import dev.bulletin.protocol.HeldObject;
import dev.bulletin.protocol.ObjectRef;
import dev.bulletin.protocol.ObjectUnavailable;
import dev.bulletin.protocol.Output;
import dev.bulletin.protocol.OutputStream;
import dev.bulletin.protocol.ReattachedCallGpus;
import dev.bulletin.protocol.RegisterWorker;
import dev.bulletin.protocol.RunCall;
import dev.bulletin.protocol.WorkerHeartbeat;
import dev.bulletin.protocol.WorkerMessage;
import dev.bulletin.protocol.WireLimits;
import dev.bulletin.worker.CallListener;
import dev.bulletin.worker.CallOutcome;
import dev.bulletin.worker.CallRequest;
import dev.bulletin.worker.WorkerAgent;
import dev.bulletin.worker.Workers;
import dev.bulletin.worker.tls.TlsOptions;
import dev.bulletin.worker.tls.TlsSetup;
import io.vertx.core.Context;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.net.SocketAddress;
import io.vertx.grpc.client.GrpcClient;
import io.vertx.grpc.client.GrpcClientOptions;
import io.vertx.grpc.client.impl.GrpcClientImpl;
import io.vertx.core.http.HttpClientAgent;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.logging.Logger;

/**
 * A worker agent attached to a runtime on another host (or in a Slurm allocation): its own object
 * store and warm executors, driven over the runtime's {@code Workers.Attach} stream
 * ({@link HeadLink}). When the link breaks, its calls run on while it reattaches; when the
 * runtime stays away past the reconnect timeout, the node stops its executors and ends.
 *
 * <p>A large result stays in this store, held for the runtime, until it sends DropObjects; when
 * a client or another worker needs it, the runtime sends SendObject and the node uploads it
 * (the node dials the runtime, never the other way round). The node reports what its store
 * holds after each call, and what it evicted since, for the scheduler's locality score.
 */
public final class WorkerNode implements AutoCloseable {

  private static final Logger LOG = Logger.getLogger(WorkerNode.class.getName());
  private static final long SIGTERM_GRACE_MILLIS = 500;

  private final WorkerNodeOptions options;
  /** How the runtime is dialled: TLS (its certificate checked) or plaintext. */
  private final TlsOptions tls;
  private final Vertx vertx = dev.bulletin.worker.EventLoops.create();
  private final Context context = vertx.getOrCreateContext();
  private final ObjectStore store;
  private final WorkerAgent agent;
  private final GrpcClient client;
  private final HeadObjects objects;
  /** This node's own data port, and fetches from other workers' (docs/data-plane.md). */
  private final PeerObjects peers;
  private final CompletableFuture<String> ended = new CompletableFuture<>();
  /** The Attach stream, kept up across a broken link. */
  private final HeadLink link;
  /** Functions held in the local store for the node's lifetime (calls send them once). */
  private final Set<ObjectKey> functions = new HashSet<>();
  /** Spill objects announced to the runtime and not said gone yet. */
  private final Set<ObjectKey> announcedSpills = new HashSet<>();
  /** Calls the runtime stopped before they reached an executor. */
  private final Set<String> stoppedEarly = new HashSet<>();
  /** Results kept for the runtime, and what the runtime was told the store holds. */
  private final StoreReport storeReport;
  private long inlineLimit;
  /**
   * Calls given to the agent and not ended, with the GPUs each runs on: reported when the
   * worker reattaches (a restored runtime reserves those GPUs again).
   */
  private final java.util.Map<String, List<Integer>> running = new java.util.LinkedHashMap<>();
  private long heartbeats = -1;
  private final java.util.concurrent.atomic.AtomicBoolean closing =
      new java.util.concurrent.atomic.AtomicBoolean();

  /** This worker's own certificate, renewed while it runs; null: it uses the worker token. */
  private final WorkerIdentity identity;
  /** The gRPC client's HTTP client: a renewed certificate is loaded into it. */
  private final HttpClientAgent http;

  private WorkerNode(WorkerNodeOptions options, TlsOptions tls, WorkerIdentity identity)
      throws Exception {
    if (options.token().isBlank() && identity == null) {
      throw new IllegalArgumentException(WorkerNodeOptions.NO_TOKEN);
    }
    this.options = options;
    this.tls = tls;
    this.identity = identity;
    this.store = ObjectStores.open(dev.bulletin.bridge.StoreOptions.withDefaults(
        options.storeFolder(), 0, null).withUserShare(options.storeUserShareBytes()));
    this.storeReport = new StoreReport(store);
    this.agent = Workers.local(options.worker(), store);
    this.http = vertx.createHttpClient(TlsSetup.dial(tls));
    this.client = new GrpcClientImpl(vertx,
        new GrpcClientOptions().setMaxMessageSize(WireLimits.MAX_MESSAGE_BYTES), http, true) { };
    SocketAddress head = SocketAddress.inetSocketAddress(options.headPort(), options.headHost());
    this.objects = new HeadObjects(vertx, client, head, options.token(), store,
        options.bulkData(), tls.enabled() ? TlsSetup.clientEngines(vertx, tls) : null);
    this.peers = PeerObjects.start(vertx, options, objects, store, options.bulkData(), tls);
    this.link = new HeadLink(vertx, client, options, tls, this::registration, this::onHead,
        this::stop);
    agent.onSpills(new dev.bulletin.worker.SpillListener() {
      @Override
      public void spilled(ObjectKey spill, long size, java.util.Map<String, String> handles) {
        context.runOnContext(ignored -> announceSpill(spill, handles));
      }

      @Override
      public void gone(ObjectKey spill) {
        context.runOnContext(ignored -> spillGone(spill));
      }
    });
  }

  /**
   * Starts the executors, attaches to the runtime and returns once it accepted the worker.
   *
   * @throws WorkerRefusedException if the runtime refused it (token, duplicate id, version) or
   *     cannot be reached
   */
  public static WorkerNode start(WorkerNodeOptions options) throws Exception {
    return start(options, TlsOptions.plain());
  }

  /**
   * Starts the executors, attaches to the runtime over TLS as {@code tls} says (the runtime's
   * certificate checked against its CA and the head's host name) and returns once it accepted
   * the worker.
   *
   * @throws WorkerRefusedException if the runtime refused it, cannot be reached, or its
   *     certificate is not trusted
   */
  public static WorkerNode start(WorkerNodeOptions options, TlsOptions tls) throws Exception {
    return start(options, tls, null);
  }

  /**
   * Starts as {@link #start(WorkerNodeOptions, TlsOptions)}, presenting {@code identity}'s
   * certificate (mutual TLS) in place of the worker token, and renewing it while it runs.
   */
  public static WorkerNode start(WorkerNodeOptions options, TlsOptions tls,
      WorkerIdentity identity) throws Exception {
    WorkerNode node = new WorkerNode(options, identity == null ? tls : identity.tls(tls),
        identity);
    try {
      node.agent.start().get(options.worker().executorStartTimeoutMillis() * 2,
          TimeUnit.MILLISECONDS);
      node.context.runOnContext(ignored -> node.link.attach());
      node.link.accepted().get(30, TimeUnit.SECONDS);
      if (identity != null) {
        node.context.runOnContext(ignored -> identity.keepRenewed(node.vertx, node.client,
            SocketAddress.inetSocketAddress(options.headPort(), options.headHost()),
            node::presentRenewed, node.ended::isDone));
      }
      return node;
    } catch (java.util.concurrent.ExecutionException e) {
      node.close();
      throw e.getCause() instanceof Exception cause ? cause : e;
    } catch (Exception e) {
      node.close();
      throw e;
    }
  }

  /**
   * Loads the certificate the worker just renewed where it is presented: later connections to
   * the runtime, and this node's data port.
   */
  private Future<Void> presentRenewed() {
    return http.updateSSLOptions(TlsSetup.dial(tls).getSslOptions(), true)
        .compose(updated -> vertx.executeBlocking(() -> {
          peers.renewed();
          return null;
        }));
  }

  /** Completes with the reason the node stopped serving (the runtime went away, or close). */
  public CompletableFuture<String> ended() {
    return ended;
  }

  /** The registration; a reattach also names the calls it runs and the results it keeps. */
  private RegisterWorker registration(RegisterWorker.Builder register) {
    if (register.getReattach()) {
      register.addAllRunningTaskIds(running.keySet())
          .addAllHeldObjects(storeReport.keptObjects());
      running.forEach((taskId, gpus) -> register.addReattachedCallGpus(
          ReattachedCallGpus.newBuilder().setTaskId(taskId).addAllGpuIds(gpus)));
    }
    return peers.announce(register).setWorkerId(options.worker().workerId())
        .setHost(options.hostName()).setPool(options.pool())
        .addAllGpuNames(options.worker().gpus().names())
        .setSimulatedGpus(options.worker().gpus().simulated()).setCpus(options.worker().cpus())
        .setGpuTopology(options.worker().gpus().topology())
        .setMemoryBytes(options.worker().memoryBytes()).setExpiresAt(options.expiresAt())
        .setProviderHandle(options.providerHandle()).setVersion(options.version()).build();
  }

  private void onHead(HeadMessage message) {
    if (message.hasAccepted()) {
      inlineLimit = message.getAccepted().getInlineLimitBytes();
      peers.accepted(message.getAccepted());
      long every = Math.max(100, (long) (message.getAccepted().getHeartbeatSeconds() * 1000));
      if (heartbeats >= 0) {
        vertx.cancelTimer(heartbeats); // a reattach: the runtime may ask for another pace
      }
      heartbeats = vertx.setPeriodic(every, id -> send(WorkerMessage.newBuilder().setHeartbeat(
          heartbeat()).build()));
      // Calls the runtime gave up while the link was down (a reattach after its grace).
      for (String taskId : message.getAccepted().getStopTaskIdsList()) {
        stop(taskId, "the runtime gave it up while this worker was away");
      }
    } else if (message.hasRun()) {
      run(message.getRun());
    } else if (message.hasStop()) {
      String taskId = message.getStop().getTaskId();
      double grace = message.getStop().getGraceSeconds();
      if (grace > 0) {
        agent.preempt(taskId, message.getStop().getReason(),
            java.time.Duration.ofMillis((long) (grace * 1000)));
      } else {
        stop(taskId, message.getStop().getReason());
      }
    } else if (message.hasSend()) {
      sendKept(message.getSend().getNamespace(), message.getSend().getId());
    } else if (message.hasDrop()) {
      for (String id : message.getDrop().getIdsList()) {
        dropKept(message.getDrop().getNamespace(), id);
      }
    } else if (message.hasForgetSpill()) {
      try {
        agent.forgetSpill(ObjectKey.of(message.getForgetSpill().getNamespace(),
            message.getForgetSpill().getId()), message.getForgetSpill().getWhy());
      } catch (IllegalArgumentException ignored) {
        // Names no spill of this node's.
      }
    } else if (message.hasDropResident() && !message.getDropResident().getNamespace().isEmpty()) {
      agent.dropResident(message.getDropResident().getNamespace(),
          message.getDropResident().getSession(), message.getDropResident().getEnded());
    }
  }

  private WorkerHeartbeat heartbeat() {
    WorkerHeartbeat.Builder beat = WorkerHeartbeat.newBuilder().setRunningCalls(running.size())
        .setStoreReferenced(store.stats().referenced() - functions.size())
        .addAllDropped(storeReport.evicted());
    agent.usage().current().forEach((gpu, utilisation) -> beat.addGpuUtilisation(
        dev.bulletin.protocol.GpuUtilisationSample.newBuilder().setGpu(gpu)
            .setUtilisation(utilisation)));
    return beat.build();
  }

  // ---- kept results --------------------------------------------------------------------------

  /** The runtime asked for a kept result: upload it, or say why not. */
  private void sendKept(String namespace, String id) {
    ObjectKey key;
    try {
      key = ObjectKey.of(namespace, id);
    } catch (IllegalArgumentException e) {
      unavailable(namespace, id, e.getMessage());
      return;
    }
    if (!storeReport.keeps(key)) {
      unavailable(namespace, id, "worker " + options.worker().workerId() + " keeps no " + key);
      return;
    }
    objects.upload(key).onFailure(error -> unavailable(namespace, id, "worker "
        + options.worker().workerId() + " could not upload it: " + error.getMessage()));
  }

  private void unavailable(String namespace, String id, String reason) {
    send(WorkerMessage.newBuilder().setUnavailable(ObjectUnavailable.newBuilder()
        .setNamespace(namespace).setId(id).setReason(reason)).build());
  }

  private void dropKept(String namespace, String id) {
    try {
      storeReport.drop(ObjectKey.of(namespace, id));
    } catch (IllegalArgumentException ignored) {
      // Names nothing this node keeps.
    }
  }

  // ---- spilled resident values ------------------------------------------------------------

  /**
   * An executor here spilled resident values: the spill object is kept for the runtime, as a
   * kept result is (until DropObjects), so a call of its user on another host can fetch it.
   */
  private void announceSpill(ObjectKey spill, java.util.Map<String, String> handles) {
    List<HeldObject> held = storeReport.held(List.of(spill));
    if (held.isEmpty() || !store.retainIfPresent(spill)) {
      return; // gone already: nothing to announce
    }
    storeReport.keep(spill);
    announcedSpills.add(spill);
    send(WorkerMessage.newBuilder().setResidentSpilled(dev.bulletin.protocol.ResidentSpilled
        .newBuilder().setObject(held.get(0)).putAllHandles(handles)).build());
  }

  private void spillGone(ObjectKey spill) {
    if (announcedSpills.remove(spill)) {
      send(WorkerMessage.newBuilder().setResidentSpillGone(dev.bulletin.protocol
          .ResidentSpillGone.newBuilder().setNamespace(spill.namespace())
          .setId(spill.id().hex())).build());
    }
  }

  // ---- running calls -------------------------------------------------------------------------

  /**
   * Stops a call this node runs. One that already ended here (its end not yet acknowledged: the
   * runtime gave it up while the link was down) is left alone: marking it would refuse the
   * runtime's next attempt of it, which may come to this node under the same task id.
   */
  private void stop(String taskId, String reason) {
    if (running.containsKey(taskId)) {
      stoppedEarly.add(taskId);
      agent.stop(taskId, reason);
    }
  }

  private void run(RunCall call) {
    String taskId = call.getTaskId();
    running.put(taskId, List.copyOf(call.getGpuIdsList()));
    String namespace = call.getNamespace().isEmpty() ? "head" : call.getNamespace();
    Future<ObjectKey> function = holdFunction(namespace, call.getFunction());
    Future<ObjectKey> args = function.compose(ignored -> localCopy(namespace, call.getArgs()));
    List<ObjectKey> refs = new ArrayList<>();
    Future<ObjectKey> inputs = args;
    for (ObjectRef ref : call.getRefsList()) {
      inputs = inputs.compose(ignored -> localCopy(namespace, ref).onSuccess(refs::add));
    }
    inputs.onFailure(error -> {
      function.onSuccess(ignored -> { }); // the function stays held for later calls
      args.onSuccess(store::release);
      refs.forEach(store::release);
      ended(taskId, CallEnded.newBuilder().setFailed("worker " + options.worker().workerId()
          + " could not get the call's objects from the runtime: " + error.getMessage()));
    }).onSuccess(ignoredInputs -> {
      ObjectKey argsId = args.result();
      List<ObjectKey> inputKeys = new ArrayList<>(refs);
      inputKeys.add(argsId);
      if (stoppedEarly.remove(taskId)) {
        store.release(argsId);
        refs.forEach(store::release);
        ended(taskId, CallEnded.newBuilder().setStopped("stopped before it started")
            .addAllHeld(storeReport.held(inputKeys)));
        return;
      }
      CallRequest request = new CallRequest(taskId, function.result(), argsId, refs,
          call.getGpuIdsList(), java.util.Optional.of(call.getRunAs()),
          dev.bulletin.worker.ExecutorSpec.of(call.getMemoryBytes(), call.getEnvironment())
              .withGpuFraction(call.getGpuFraction()), call.getSession(),
          restoreOf(namespace, call), call.getResidentLostMap());
      agent.run(request, listener(taskId)).whenComplete((outcome, error) ->
          context.runOnContext(ignored -> {
            List<HeldObject> held = storeReport.held(inputKeys);
            store.release(argsId);
            refs.forEach(store::release);
            stoppedEarly.remove(taskId);
            report(taskId, error == null ? outcome
                : new CallOutcome.ExecutorDied("worker agent failed: " + error), held);
          }));
    });
  }

  /** The spills of other workers the call may restore: handle id to the object (a ref). */
  private static java.util.Map<String, ObjectKey> restoreOf(String namespace, RunCall call) {
    java.util.Map<String, ObjectKey> restore = new java.util.HashMap<>();
    call.getRestoreMap().forEach((handle, id) -> {
      try {
        restore.put(handle, new ObjectKey(namespace, ObjectId.parse(id)));
      } catch (IllegalArgumentException malformed) {
        // Names no object: that handle is not restored.
      }
    });
    return restore;
  }

  private CallListener listener(String taskId) {
    return new CallListener() {
      @Override
      public void started(String executorId) {
        context.runOnContext(ignored -> send(WorkerMessage.newBuilder().setStarted(
            CallStarted.newBuilder().setTaskId(taskId).setExecutorId(executorId)).build()));
      }

      @Override
      public void output(boolean stderr, byte[] data) {
        context.runOnContext(ignored -> send(WorkerMessage.newBuilder().setOutput(
            CallOutput.newBuilder().setTaskId(taskId).setOutput(Output.newBuilder()
                .setStream(stderr ? OutputStream.STDERR : OutputStream.STDOUT)
                .setData(ByteString.copyFrom(data)))).build()));
      }
    };
  }

  /** The function in the local store, held for the node's lifetime once fetched. */
  private Future<ObjectKey> holdFunction(String namespace, ObjectRef ref) {
    ObjectKey id;
    try {
      id = new ObjectKey(namespace, ObjectId.parse(ref.getId()));
    } catch (IllegalArgumentException e) {
      return Future.failedFuture(e);
    }
    if (functions.contains(id)) {
      return Future.succeededFuture(id);
    }
    return localCopy(namespace, ref).onSuccess(functions::add);
  }

  /** Puts the object in the local store (inline bytes, or fetched) with one reference. */
  private Future<ObjectKey> localCopy(String namespace, ObjectRef ref) {
    try {
      ObjectKey id = new ObjectKey(namespace, ObjectId.parse(ref.getId()));
      if (!ref.getInlineData().isEmpty() || ref.getSize() == 0) {
        return Future.succeededFuture(store.put(id, ref.getInlineData().asReadOnlyByteBuffer()));
      }
      if (store.retainIfPresent(id)) {
        return Future.succeededFuture(id);
      }
      return ref.hasDirect() ? peers.fetch(id, ref.getSize(), ref.getDirect())
          : objects.fetch(id, ref.getSize());
    } catch (RuntimeException e) {
      return Future.failedFuture(e);
    }
  }

  private void report(String taskId, CallOutcome outcome, List<HeldObject> held) {
    if (outcome instanceof CallOutcome.Returned returned) {
      returnResult(taskId, returned, held);
    } else if (outcome instanceof CallOutcome.ExecutorDied died) {
      if (died.cause().contains("SIGTERM")) {
        // A cancelled or ending allocation (scancel, walltime) signals the whole job at once:
        // give this node's own shutdown a moment to win, so the runtime hears "worker lost"
        // (the call may run again elsewhere) rather than "executor died, replaced".
        vertx.setTimer(SIGTERM_GRACE_MILLIS, id -> ended(taskId,
            CallEnded.newBuilder().setExecutorDied(died.cause()).addAllHeld(held)));
        return;
      }
      ended(taskId, CallEnded.newBuilder().setExecutorDied(died.cause()).addAllHeld(held));
    } else if (outcome instanceof CallOutcome.Stopped stopped) {
      ended(taskId, CallEnded.newBuilder().setStopped(stopped.reason()).addAllHeld(held));
    } else if (outcome instanceof CallOutcome.WorkerLost lost) {
      ended(taskId, CallEnded.newBuilder().setFailed(lost.cause()).addAllHeld(held));
    } else if (outcome instanceof CallOutcome.Undelivered undelivered) {
      ended(taskId, CallEnded.newBuilder().setFailed(undelivered.cause()).addAllHeld(held));
    }
  }

  /**
   * Small results travel in the message; a larger one stays here, its reference kept for the
   * runtime (it is named by its content, as the runtime will name it), until DropObjects.
   */
  private void returnResult(String taskId, CallOutcome.Returned returned,
      List<HeldObject> inputs) {
    CallReturned.Builder message = CallReturned.newBuilder().setRaised(returned.raised())
        .setRunSeconds(returned.runSeconds()).setResidentBytes(returned.residentBytes());
    if (returned.leasedCalls() >= 0) {
      message.setLeasedCalls(returned.leasedCalls());
    }
    ObjectKey result = returned.result();
    if (returned.size() <= inlineLimit) {
      byte[] bytes = store.readSmall(result);
      store.release(result);
      message.setResult(ObjectRef.newBuilder().setId(result.id().hex())
          .setSize(bytes.length).setInlineData(ByteString.copyFrom(bytes)));
      ended(taskId, CallEnded.newBuilder().setReturned(message).addAllHeld(inputs));
      return;
    }
    storeReport.keep(result);
    message.setResult(ObjectRef.newBuilder().setId(result.id().hex()).setSize(returned.size()))
        .setKept(true);
    ended(taskId, CallEnded.newBuilder().setReturned(message).addAllHeld(inputs)
        .addAllHeld(storeReport.held(List.of(result))));
  }

  private void ended(String taskId, CallEnded.Builder ending) {
    running.remove(taskId);
    ending.setGpuSecondsBusy(agent.usage().takeBusyGpuSeconds(taskId));
    send(WorkerMessage.newBuilder().setEnded(ending.setTaskId(taskId)).build());
  }

  private void send(WorkerMessage message) {
    if (!ended.isDone()) {
      link.send(message);
    }
  }

  private void stop(String why) {
    if (ended.complete(why)) { // `bulletin worker` says it on its own line
      LOG.fine(() -> "worker " + options.worker().workerId() + " stops: " + why);
    }
  }

  /** Detaches from the runtime, stops every executor and removes the local store. */
  @Override
  public void close() {
    if (!closing.compareAndSet(false, true)) {
      return; // once: after the head went away, and again from the JVM's shutdown hook
    }
    stop("closed");
    context.runOnContext(ignored -> link.close());
    agent.close();
    objects.close();
    peers.close();
    try {
      vertx.close().toCompletionStage().toCompletableFuture().get(10, TimeUnit.SECONDS);
    } catch (Exception ignored) {
      // Closing anyway.
    }
    store.close();
  }
}
