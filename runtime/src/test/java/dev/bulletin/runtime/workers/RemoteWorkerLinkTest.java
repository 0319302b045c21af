package dev.bulletin.runtime.workers;

import dev.bulletin.runtime.objects.ObjectDirectory;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.bridge.ObjectStores;
import dev.bulletin.protocol.HeadMessage;
import dev.bulletin.protocol.WorkerMessage;
import dev.bulletin.worker.CallListener;
import dev.bulletin.worker.CallOutcome;
import dev.bulletin.worker.CallRequest;
import io.vertx.grpc.server.GrpcServerResponse;
import java.lang.reflect.Proxy;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A call sent down a worker's stream that is already broken (the worker left as the call was
 * placed) never reached it: it ends as undelivered, which puts it back in the queue without
 * using a retry, not as a lost worker, which fails a call without retries.
 */
class RemoteWorkerLinkTest {

  private static final ObjectKey FUNCTION = ObjectKey.of("ada", "f".repeat(32));
  private static final ObjectKey ARGS = ObjectKey.of("ada", "a".repeat(32));

  @TempDir Path folder;
  private ObjectStore store;
  private ObjectDirectory objects;
  private final AtomicBoolean streamBroken = new AtomicBoolean();
  private final List<HeadMessage> written = new ArrayList<>();
  private final List<String> detached = new ArrayList<>();

  @BeforeEach
  void setUp() {
    store = ObjectStores.inFolder(folder.resolve("store"));
    store.put(FUNCTION, ByteBuffer.wrap(new byte[] {1}));
    store.put(ARGS, ByteBuffer.wrap(new byte[] {2}));
    objects = new ObjectDirectory(store, id -> Optional.empty());
  }

  @AfterEach
  void tearDown() {
    store.close();
  }

  /** The stream's only use here is write(); it throws as Vert.x does on a cancelled stream. */
  @SuppressWarnings("unchecked")
  private GrpcServerResponse<WorkerMessage, HeadMessage> stream() {
    return (GrpcServerResponse<WorkerMessage, HeadMessage>) Proxy.newProxyInstance(
        getClass().getClassLoader(), new Class<?>[] {GrpcServerResponse.class},
        (proxy, method, args) -> {
          if (method.getName().equals("write")) {
            if (streamBroken.get()) {
              throw new IllegalStateException("The stream is failed: CANCELLED");
            }
            written.add((HeadMessage) args[0]);
            return null;
          }
          throw new UnsupportedOperationException(method.getName());
        });
  }

  private CompletableFuture<CallOutcome> run(RemoteWorkerLink link, String taskId) {
    return link.run(new CallRequest(taskId, FUNCTION, ARGS, List.of()), new CallListener() {
      @Override
      public void started(String executorId) {}

      @Override
      public void output(boolean stderr, byte[] data) {}
    });
  }

  @Test
  void aCallWrittenToABrokenStreamIsUndeliveredAndTheBreakIsReportedOnce() {
    RemoteWorkerLink link = new RemoteWorkerLink("w1", stream(), objects, 1024, detached::add);
    CompletableFuture<CallOutcome> running = run(link, "t1");
    assertEquals(1, written.size());
    assertTrue(!running.isDone(), "a delivered call waits for the worker");

    streamBroken.set(true);
    CallOutcome second = run(link, "t2").join();
    assertInstanceOf(CallOutcome.Undelivered.class, second);
    assertEquals(1, detached.size());
    assertTrue(detached.get(0).contains("CANCELLED"), detached.get(0));
    // The call that had reached the worker waits: the worker may reattach and report it.
    assertTrue(!running.isDone());

    // Placed again before the break took effect: still undelivered, nothing more reported.
    assertInstanceOf(CallOutcome.Undelivered.class, run(link, "t3").join());
    assertEquals(1, detached.size());

    // The grace period passed: the worker is gone, and its call with it (it may have run).
    link.close("did not reattach");
    assertInstanceOf(CallOutcome.WorkerLost.class, running.join());
  }

  @Test
  void callsOfOneTurnLeaveAsOneBatchAndABrokenBatchHandsItsCallsBackAsUndelivered() {
    List<Runnable> afterTurn = new ArrayList<>();
    RemoteWorkerLink link = new RemoteWorkerLink("w1", stream(), objects, 1024, detached::add,
        afterTurn::add);
    CompletableFuture<CallOutcome> first = run(link, "t1");
    CompletableFuture<CallOutcome> second = run(link, "t2");
    assertEquals(0, written.size(), "nothing leaves before the turn's work is done");
    assertEquals(1, afterTurn.size(), "one write per turn, not one per call");
    afterTurn.remove(0).run();
    assertEquals(1, written.size());
    assertEquals(List.of("t1", "t2"), written.get(0).getBatch().getMessagesList().stream()
        .map(message -> message.getRun().getTaskId()).toList());

    // A lone call leaves alone, not wrapped in a batch.
    run(link, "t3");
    afterTurn.remove(0).run();
    assertEquals("t3", written.get(1).getRun().getTaskId());

    // The stream breaks under a batch of two calls and a stop: the calls never reached the
    // worker (undelivered: requeued without using a retry), the stop waits for a reattach,
    // and the break is reported once.
    CompletableFuture<CallOutcome> fourth = run(link, "t4");
    link.stop("t1", "cancelled by its caller");
    CompletableFuture<CallOutcome> fifth = run(link, "t5");
    streamBroken.set(true);
    afterTurn.remove(0).run();
    assertInstanceOf(CallOutcome.Undelivered.class, fourth.join());
    assertInstanceOf(CallOutcome.Undelivered.class, fifth.join());
    assertEquals(1, detached.size());
    assertTrue(!first.isDone() && !second.isDone(), "delivered calls wait for the worker");
    streamBroken.set(false);
    link.resume(stream(), java.util.Set.of("t1", "t2", "t3"));
    link.flushOwed();
    HeadMessage owed = written.get(written.size() - 1);
    assertEquals("t1", owed.getStop().getTaskId(), "the stop went out after the reattach");
  }

  @Test
  void aWorkersBatchIsReadAsItsMessagesInOrderEachTakenOnce() {
    RemoteWorkerLink link = new RemoteWorkerLink("w1", stream(), objects, 1024, detached::add);
    List<String> lines = new ArrayList<>();
    CompletableFuture<CallOutcome> call = link.run(new CallRequest("t1", FUNCTION, ARGS,
        List.of()), new CallListener() {
          @Override
          public void started(String executorId) {}

          @Override
          public void output(boolean stderr, byte[] data) {
            lines.add(new String(data, java.nio.charset.StandardCharsets.UTF_8));
          }
        });
    ObjectKey result = ObjectKey.of("ada", "c".repeat(32));
    WorkerMessage batch = WorkerMessage.newBuilder().setBatch(
        dev.bulletin.protocol.WorkerBatch.newBuilder()
            .addMessages(output("t1", "one\n", 1)).addMessages(output("t1", "two\n", 2))
            .addMessages(keptEnd("t1", result, 3))).build();
    link.onMessage(batch);
    link.onMessage(batch); // sent again after a reattach: every report in it arrived before
    assertEquals(List.of("one\n", "two\n"), lines);
    assertInstanceOf(CallOutcome.Returned.class, call.join());
    assertEquals(3, link.receivedSeq());
  }

  @Test
  void aReattachKeepsTheCallsTheWorkerReportsAndSendsWhatWaited() {
    RemoteWorkerLink link = new RemoteWorkerLink("w1", stream(), objects, 1024, detached::add);
    CompletableFuture<CallOutcome> kept = run(link, "t1");
    CompletableFuture<CallOutcome> forgotten = run(link, "t2");
    link.suspend();
    link.stop("t1", "cancelled by its caller"); // owed until the worker is back
    assertEquals(2, written.size());

    List<String> toStop = link.resume(stream(), java.util.Set.of("t1", "t9"));
    assertEquals(List.of("t9"), toStop, "a call the runtime does not know there is stopped");
    assertInstanceOf(CallOutcome.WorkerLost.class, forgotten.join());
    assertTrue(!kept.isDone(), "a call the worker still runs keeps running");
    link.flushOwed();
    assertEquals(3, written.size());
    assertEquals("t1", written.get(2).getStop().getTaskId());
    assertEquals(0, detached.size());
  }

  private static WorkerMessage keptEnd(String taskId, ObjectKey result, long seq) {
    return WorkerMessage.newBuilder().setSeq(seq).setEnded(dev.bulletin.protocol.CallEnded
        .newBuilder().setTaskId(taskId).setReturned(dev.bulletin.protocol.CallReturned
            .newBuilder().setResult(dev.bulletin.protocol.ObjectRef.newBuilder()
                .setId(result.id().hex()).setSize(4 << 20)).setKept(true))
        .addHeld(dev.bulletin.protocol.HeldObject.newBuilder().setNamespace(result.namespace())
            .setId(result.id().hex()).setSize(4 << 20))).build();
  }

  private static final WorkerMessage HEARTBEAT = WorkerMessage.newBuilder().setHeartbeat(
      dev.bulletin.protocol.WorkerHeartbeat.getDefaultInstance()).build();

  @Test
  void whatArrivedIsAcknowledgedOnlyOnceTheJournalHasIt() {
    RemoteWorkerLink link = new RemoteWorkerLink("w1", stream(), objects, 1024, detached::add);
    List<java.util.function.Consumer<Boolean>> waiting = new ArrayList<>();
    link.acknowledgeWhen(waiting::add);
    CompletableFuture<CallOutcome> call = run(link, "t1");
    ObjectKey result = ObjectKey.of("ada", "c".repeat(32));
    link.onMessage(keptEnd("t1", result, 1));
    assertInstanceOf(CallOutcome.Returned.class, call.join());
    link.onMessage(HEARTBEAT);
    assertTrue(written.stream().noneMatch(HeadMessage::hasReceived), "not before the journal");
    waiting.get(0).accept(false); // the journal could not write: nothing acknowledged
    assertTrue(written.stream().noneMatch(HeadMessage::hasReceived));
    link.onMessage(keptEnd("t3", ObjectKey.of("ada", "e".repeat(32)), 2)); // an unknown call
    link.onMessage(HEARTBEAT);
    waiting.get(1).accept(true);
    HeadMessage ack = written.stream().filter(HeadMessage::hasReceived).findFirst()
        .orElseThrow();
    assertEquals(2, ack.getReceived().getSeq());
  }

  @Test
  void anEndSentAgainToARestartedRuntimeDoesNotDropAResultKeptThere() {
    ObjectKey result = ObjectKey.of("ada", "c".repeat(32));
    RemoteWorkerLink before = new RemoteWorkerLink("w1", stream(), objects, 1024, detached::add);
    run(before, "t1");
    before.onMessage(keptEnd("t1", result, 1));
    // A restarted runtime's new link knows no seq: the worker's report comes again. The
    // result is kept on w1 for its caller, so w1 is not told to drop it.
    RemoteWorkerLink after = new RemoteWorkerLink("w1", stream(), objects, 1024, detached::add);
    after.onMessage(keptEnd("t1", result, 1));
    after.onMessage(keptEnd("t3", ObjectKey.of("ada", "e".repeat(32)), 2)); // nothing wants it
    List<String> dropped = written.stream().filter(HeadMessage::hasDrop)
        .flatMap(message -> message.getDrop().getIdsList().stream()).toList();
    assertEquals(List.of("e".repeat(32)), dropped);
  }

  @Test
  void aReportSentAgainAfterAReattachIsTakenOnceAndHeartbeatsAcknowledgeWhatArrived() {
    RemoteWorkerLink link = new RemoteWorkerLink("w1", stream(), objects, 1024, detached::add);
    List<String> lines = new ArrayList<>();
    link.run(new CallRequest("t1", FUNCTION, ARGS, List.of()), new CallListener() {
      @Override
      public void started(String executorId) {}

      @Override
      public void output(boolean stderr, byte[] data) {
        lines.add(new String(data, java.nio.charset.StandardCharsets.UTF_8));
      }
    });
    WorkerMessage first = output("t1", "one\n", 1);
    link.onMessage(first);
    link.onMessage(output("t1", "two\n", 2));
    // The worker did not hear that 1 and 2 arrived, its link broke, and it sends them again.
    link.suspend();
    link.resume(stream(), java.util.Set.of("t1"));
    link.onMessage(first);
    link.onMessage(output("t1", "two\n", 2));
    link.onMessage(output("t1", "three\n", 3));
    assertEquals(List.of("one\n", "two\n", "three\n"), lines);
    assertEquals(3, link.receivedSeq());

    link.onMessage(WorkerMessage.newBuilder().setHeartbeat(
        dev.bulletin.protocol.WorkerHeartbeat.getDefaultInstance()).build());
    HeadMessage ack = written.get(written.size() - 1);
    assertTrue(ack.hasReceived(), ack.toString());
    assertEquals(3, ack.getReceived().getSeq());
  }

  private static WorkerMessage output(String taskId, String text, long seq) {
    return WorkerMessage.newBuilder().setSeq(seq).setOutput(dev.bulletin.protocol.CallOutput
        .newBuilder().setTaskId(taskId).setOutput(dev.bulletin.protocol.Output.newBuilder()
            .setData(com.google.protobuf.ByteString.copyFromUtf8(text)))).build();
  }
}
