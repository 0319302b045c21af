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

  private static WorkerMessage keptEnd(String taskId, ObjectKey result) {
    return WorkerMessage.newBuilder().setEnded(dev.bulletin.protocol.CallEnded.newBuilder()
        .setTaskId(taskId).setReturned(dev.bulletin.protocol.CallReturned.newBuilder()
            .setResult(dev.bulletin.protocol.ObjectRef.newBuilder().setId(result.id().hex())
                .setSize(4 << 20)).setKept(true))
        .addHeld(dev.bulletin.protocol.HeldObject.newBuilder().setNamespace(result.namespace())
            .setId(result.id().hex()).setSize(4 << 20))).build();
  }

  @Test
  void anEndIsAcknowledgedOnlyOnceTheJournalHasIt() {
    RemoteWorkerLink link = new RemoteWorkerLink("w1", stream(), objects, 1024, detached::add);
    List<java.util.function.Consumer<Boolean>> waiting = new ArrayList<>();
    link.acknowledgeEndsWhen(waiting::add);
    CompletableFuture<CallOutcome> call = run(link, "t1");
    run(link, "t2");
    ObjectKey result = ObjectKey.of("ada", "c".repeat(32));
    link.onMessage(keptEnd("t1", result));
    link.onMessage(keptEnd("t2", ObjectKey.of("ada", "d".repeat(32))));
    assertInstanceOf(CallOutcome.Returned.class, call.join());
    assertEquals(1, waiting.size(), "one acknowledgement for ends that arrive together");
    assertTrue(written.stream().noneMatch(HeadMessage::hasEndsJournaled));

    waiting.get(0).accept(false); // the journal could not write: nothing acknowledged
    assertTrue(written.stream().noneMatch(HeadMessage::hasEndsJournaled));
    link.onMessage(keptEnd("t3", ObjectKey.of("ada", "e".repeat(32)))); // an unknown call's end
    waiting.get(1).accept(true);
    HeadMessage ack = written.stream().filter(HeadMessage::hasEndsJournaled).findFirst()
        .orElseThrow();
    assertEquals(List.of("t1", "t2", "t3"), ack.getEndsJournaled().getTaskIdsList());

    // t1's end sent again after a reattach: its result is kept there for the runtime, so the
    // worker is not told to drop it (t3's result, which nothing waits for, was dropped).
    link.onMessage(keptEnd("t1", result));
    List<String> dropped = written.stream().filter(HeadMessage::hasDrop)
        .flatMap(message -> message.getDrop().getIdsList().stream()).toList();
    assertEquals(List.of("e".repeat(32)), dropped);
  }
}
