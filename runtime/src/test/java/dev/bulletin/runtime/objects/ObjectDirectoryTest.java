package dev.bulletin.runtime.objects;

import com.google.protobuf.ByteString;
import dev.bulletin.runtime.workers.RecordingLink;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.bridge.ObjectStoreException;
import dev.bulletin.bridge.ObjectStores;
import dev.bulletin.worker.CallListener;
import dev.bulletin.worker.CallOutcome;
import dev.bulletin.worker.CallRequest;
import dev.bulletin.worker.WorkerStatusView;
import io.vertx.core.Future;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The object directory against a real store; workers are recording links (no network). */
class ObjectDirectoryTest {


  private static final ObjectKey RESULT = ObjectKey.of("ada", "1".repeat(32));
  private static final int SIZE = 4096;

  @TempDir Path folder;
  private ObjectStore store;
  private final Map<String, RecordingLink> links = new HashMap<>();
  private ObjectDirectory objects;

  @BeforeEach
  void setUp() {
    store = ObjectStores.inFolder(folder.resolve("store"));
    links.put("w1", new RecordingLink());
    links.put("w2", new RecordingLink());
    objects = new ObjectDirectory(store, id -> Optional.ofNullable(links.get(id)));
  }

  @AfterEach
  void tearDown() {
    store.close();
  }

  /** What a worker's PutObject does when the runtime pulls: the bytes land with one reference. */
  private void upload(ObjectKey key) {
    store.put(key, ByteBuffer.wrap(new byte[SIZE]));
    objects.arrived(key);
  }

  @Test
  void aKeptResultIsCountedHereUntilItsLastReleaseDropsItOnTheWorker() {
    objects.kept("w1", RESULT, SIZE, "tensor");
    assertFalse(store.contains(RESULT), "nothing crossed to the runtime's store");
    assertEquals(SIZE, objects.size(RESULT));
    assertEquals(1, objects.workerObjects());
    assertEquals(1, objects.keptOn("w1"));
    assertTrue(objects.retainIfPresent(RESULT)); // a second call passes it on
    objects.release(RESULT);
    assertEquals(List.of(), links.get("w1").dropped);
    objects.release(RESULT);
    assertEquals(List.of(RESULT), links.get("w1").dropped);
    assertEquals(0, objects.workerObjects());
    assertEquals(0, store.stats().referenced());
  }

  @Test
  void aResultGoesDirectOnlyBetweenWorkersThatServeAPortAndWhileOnlyWorkersKeepIt() {
    objects.kept("w1", RESULT, SIZE, "tensor");
    // Neither serves a port (gRPC only): the call on w2 waits for a pull, as before.
    assertEquals(List.of(RESULT), objects.toMoveFor("w2", List.of(RESULT)));
    assertTrue(objects.directSource(RESULT, "w2").isEmpty());
    objects.direct().attach("w1", "10.0.0.1", 7001, ByteString.EMPTY);
    assertEquals(List.of(RESULT), objects.toMoveFor("w2", List.of(RESULT)),
        "a reader without a port of its own fetches through the head");
    objects.direct().attach("w2", "10.0.0.2", 7002, ByteString.EMPTY);
    assertEquals(List.of(), objects.toMoveFor("w2", List.of(RESULT)));
    var source = objects.directSource(RESULT, "w2").orElseThrow();
    assertEquals("10.0.0.1:7001", source.getAddress());
    assertEquals("w2", source.getReader());
    assertEquals("ada", source.getNamespace());
    assertTrue(objects.directSource(RESULT, "w1").isEmpty(), "the keeper reads its own copy");
    assertEquals("session:s1", objects.directForClient(RESULT, "session:s1").orElseThrow()
        .getReader());
    assertEquals(2, objects.direct().ticketsIssued());
    // Another user's object of the same id is another key: no entry, no ticket.
    assertTrue(objects.directForClient(ObjectKey.of("bob", RESULT.id().hex()), "session:s2")
        .isEmpty());
    // Once the head has a copy, it serves it; once the keeper is gone, nothing goes direct.
    objects.workerLost("w1", "lost its connection");
    assertTrue(objects.directSource(RESULT, "w2").isEmpty());
    assertEquals(List.of(RESULT), objects.toMoveFor("w2", List.of(RESULT)));
  }

  @Test
  void inATlsClusterEveryTicketCarriesTheKeepersPinAndAPortWithoutOneIsNotUsed() {
    objects.direct().requireTls(true);
    objects.kept("w1", RESULT, SIZE, "tensor");
    byte[] pinBytes = new byte[32];
    pinBytes[0] = 7;
    ByteString pin = ByteString.copyFrom(pinBytes);
    assertEquals(0, objects.direct().attach("w1", "10.0.0.1", 7001, ByteString.EMPTY).length,
        "a plaintext port in a TLS cluster gets no key");
    assertFalse(objects.direct().serves("w1"));
    assertEquals(0, objects.direct().attach("w1", "10.0.0.1", 7001,
        ByteString.copyFrom(new byte[5])).length, "a pin that is no SHA-256 is not used");
    assertTrue(objects.direct().attach("w1", "10.0.0.1", 7001, pin).length > 0);
    objects.direct().attach("w2", "10.0.0.2", 7002, ByteString.copyFrom(new byte[32]));
    assertEquals(pin, objects.directSource(RESULT, "w2").orElseThrow().getTlsFingerprint());
    assertEquals(pin, objects.directForClient(RESULT, "session:s1").orElseThrow()
        .getTlsFingerprint());
    // A reattach without a pin (a worker restarted as an older version) stops the tickets.
    objects.direct().attach("w1", "10.0.0.1", 7001, ByteString.EMPTY);
    assertTrue(objects.directSource(RESULT, "w2").isEmpty());
    objects.release(RESULT);
  }

  @Test
  void aPullAsksTheKeeperOnceAndTheUploadBecomesTheRuntimesCopy() {
    objects.kept("w1", RESULT, SIZE, "tensor");
    Future<Void> first = objects.toHead(RESULT);
    Future<Void> second = objects.toHead(List.of(RESULT));
    assertEquals(List.of(RESULT), links.get("w1").sent, "one pull per object at a time");
    assertFalse(first.isComplete());
    upload(RESULT);
    assertTrue(first.succeeded() && second.succeeded());
    assertEquals(1, objects.pulledObjects());
    assertEquals(SIZE, objects.pulledBytes());
    assertTrue(objects.toHead(RESULT).succeeded());
    assertEquals(1, links.get("w1").sent.size(), "already here: nothing moves again");
    assertEquals(1, store.stats().referenced());
    objects.release(RESULT);
    assertEquals(0, store.stats().referenced(), "the runtime's copy is released too");
    assertEquals(List.of(RESULT), links.get("w1").dropped);
  }

  @Test
  void onlyCallsPlacedAwayFromTheKeeperNeedTheObjectMoved() {
    objects.kept("w1", RESULT, SIZE, "tensor");
    assertEquals(List.of(), objects.toMoveFor("w1", List.of(RESULT)));
    assertEquals(List.of(RESULT), objects.toMoveFor("w2", List.of(RESULT)));
    assertEquals(List.of(RESULT), objects.toMoveFor(null, List.of(RESULT)), "embedded worker");
    objects.toHead(RESULT);
    upload(RESULT);
    assertEquals(List.of(), objects.toMoveFor("w2", List.of(RESULT)));
    objects.release(RESULT);
  }

  @Test
  void aResultOnlyAGoneWorkerKeptIsLostNamingTheWorker() {
    objects.kept("w1", RESULT, SIZE, "tensor");
    Future<Void> pull = objects.toHead(RESULT);
    links.remove("w1");
    objects.workerLost("w1", "went away (killed)");
    assertTrue(pull.failed());
    assertTrue(pull.cause().getMessage().contains("w1"), pull.cause().getMessage());
    ObjectStoreException lost = assertThrows(ObjectDirectory.ObjectLostException.class,
        () -> objects.retain(RESULT, "referenced"));
    assertTrue(lost.getMessage().contains("worker w1, which went away (killed)"),
        lost.getMessage());
    assertFalse(objects.retainIfPresent(RESULT), "\"has it?\" says no");
    assertTrue(objects.toHead(RESULT).failed());
    assertEquals(0, objects.workerObjects());
    objects.release(RESULT); // the caller lets go: nothing is left
    assertThrows(ObjectStoreException.class, () -> objects.size(RESULT));
  }

  @Test
  void aSecondKeeperServesWhenTheFirstGoesAwayMidPull() {
    objects.kept("w1", RESULT, SIZE, "tensor");
    objects.kept("w2", RESULT, SIZE, "tensor");
    Future<Void> pull = objects.toHead(RESULT);
    links.remove("w1");
    objects.workerLost("w1", "killed");
    assertEquals(List.of(RESULT), links.get("w2").sent);
    upload(RESULT);
    assertTrue(pull.succeeded());
    objects.release(RESULT);
    objects.release(RESULT);
    assertEquals(List.of(RESULT), links.get("w2").dropped);
    assertEquals(0, store.stats().referenced());
  }

  @Test
  void aWorkerThatCannotSendFailsThePullButStillKeepsAndDropsItsCopy() {
    objects.kept("w1", RESULT, SIZE, "tensor");
    Future<Void> pull = objects.toHead(RESULT);
    objects.unavailable("w1", RESULT, "the runtime's store is full");
    assertTrue(pull.failed());
    assertFalse(pull.cause() instanceof ObjectDirectory.ObjectLostException);
    assertTrue(pull.cause().getMessage().contains("store is full"), pull.cause().getMessage());
    objects.toHead(RESULT); // asked again
    assertEquals(List.of(RESULT, RESULT), links.get("w1").sent);
    objects.release(RESULT);
    assertEquals(List.of(RESULT), links.get("w1").dropped);
  }

  @Test
  void equalBytesAlreadyInTheRuntimesStoreServeAndTheWorkerNeedNotKeepThem() {
    store.put(RESULT, ByteBuffer.wrap(new byte[SIZE]));
    objects.kept("w1", RESULT, SIZE, "tensor");
    assertEquals(List.of(RESULT), links.get("w1").dropped);
    assertEquals(2, store.info(RESULT).references());
    assertEquals(List.of(), objects.toMoveFor("w2", List.of(RESULT)));
    objects.release(RESULT);
    objects.release(RESULT);
    assertEquals(0, store.stats().referenced());
  }

  @Test
  void workersReportWhatTheyHoldForTheLocalityScore() {
    ObjectKey input = ObjectKey.of("ada", "2".repeat(32));
    objects.held("w2", input, 1 << 20);
    objects.kept("w1", RESULT, SIZE, "tensor");
    assertEquals(Map.of(input.id().hex(), 1L << 20), objects.heldBy("w2"));
    assertEquals(Map.of(RESULT.id().hex(), (long) SIZE), objects.heldBy("w1"));
    objects.dropped("w2", input);
    objects.dropped("w1", RESULT); // a kept result cannot be evicted: the report is stale
    assertEquals(Map.of(), objects.heldBy("w2"));
    assertEquals(Map.of(RESULT.id().hex(), (long) SIZE), objects.heldBy("w1"));
    objects.workerLost("w1", "gone");
    assertEquals(Map.of(), objects.heldBy("w1"));
    objects.release(RESULT);
  }
}
