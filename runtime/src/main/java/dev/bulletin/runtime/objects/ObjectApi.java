package dev.bulletin.runtime.objects;

import dev.bulletin.runtime.api.SessionHolds;
import dev.bulletin.runtime.control.ControlPlane;
import dev.bulletin.runtime.dataport.BulkTickets;
import com.google.protobuf.UnsafeByteOperations;
import dev.bulletin.bridge.ObjectId;
import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.bridge.ObjectStoreException;
import dev.bulletin.bridge.StoreFullException;
import dev.bulletin.protocol.AdoptObjectRequest;
import dev.bulletin.protocol.GetObjectRequest;
import dev.bulletin.protocol.HasObjectsReply;
import dev.bulletin.protocol.HasObjectsRequest;
import dev.bulletin.protocol.ObjectChunk;
import dev.bulletin.protocol.OpenTransferReply;
import dev.bulletin.protocol.OpenTransferRequest;
import dev.bulletin.protocol.PutObjectReply;
import dev.bulletin.protocol.TransferDirection;
import io.vertx.grpc.common.GrpcStatus;
import io.vertx.grpc.server.GrpcServerRequest;
import io.vertx.grpc.server.GrpcServerResponse;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.List;
import java.util.UUID;
import java.util.zip.CRC32C;

/**
 * The object RPCs: chunked upload and download with a CRC32C per chunk and one over the whole
 * object, tickets for the same through the bulk data port, "has it?", and adoption of files a
 * same-host client wrote into its store folder. Every object is looked up in the caller's
 * namespace only. Handlers run on the control plane's loop.
 */
public final class ObjectApi {
  static final int CHUNK_BYTES = 1 << 20;
  /** Below this a write's page faults cost less than giving up a cached object. */
  static final long RECYCLE_MIN_BYTES = 1 << 20;
  /** A worker moving objects for a call names the call owner's namespace in this metadata. */
  public static final String NAMESPACE_HEADER = "bulletin-namespace";
  /** Trailer naming the FailureCode of an object call that failed for a call-like reason. */
  static final String FAILURE_TRAILER = "bulletin-failure";

  public interface Handler<Req, Resp> {
    void handle(Caller caller, GrpcServerRequest<Req, Resp> request);
  }

  /**
   * Who moves an object, and for whom: a user in one of their sessions (whose holds keep what
   * they upload), or a worker agent working for a call owned by {@code namespace}.
   */
  public record Caller(String namespace, SessionHolds holds, boolean worker) {
    public static Caller user(String namespace, SessionHolds holds) {
      return new Caller(namespace, holds, false);
    }

    public static Caller worker(String namespace) {
      if (namespace == null) {
        throw new IllegalArgumentException("a worker's object call must name the call owner's"
            + " namespace in the " + NAMESPACE_HEADER + " metadata; upgrade the worker");
      }
      return new Caller(ObjectKey.of(namespace, "0".repeat(32)).namespace(), null, true);
    }

    /** An upload needs someone to keep it: a user's session (a worker's goes to its call). */
    void requireHolder() {
      if (!worker) {
        session();
      }
    }

    SessionHolds session() {
      if (holds == null) {
        throw new IllegalArgumentException("object uploads need the bulletin-session metadata"
            + " naming the client's Session stream; upgrade the bulletin client");
      }
      return holds;
    }
  }

  private final ControlPlane plane;
  private final BulkTickets tickets;
  /** The bulk data port announced with tickets; 0 when the runtime has none. */
  private int dataPort;

  public ObjectApi(ControlPlane plane, BulkTickets tickets) {
    this.plane = plane;
    this.tickets = tickets;
  }

  public void dataPort(int port) {
    this.dataPort = port;
  }

  private ObjectStore store() {
    return plane.store();
  }

  static int crc32c(ByteBuffer data) {
    CRC32C crc = new CRC32C();
    crc.update(data.duplicate());
    return (int) crc.getValue();
  }

  public void putObject(Caller caller, GrpcServerRequest<ObjectChunk, PutObjectReply> request) {
    caller.requireHolder();
    PutState state = new PutState();
    request.handler(chunk -> {
      if (state.failed) {
        return;
      }
      try {
        state.accept(chunk, caller.namespace());
      } catch (IllegalArgumentException | ObjectStoreException e) {
        state.abort();
        request.response().status(statusOf(e)).statusMessage(e.getMessage()).end();
      }
    });
    request.endHandler(ignored -> {
      if (state.failed) {
        return;
      }
      if (state.upload == null) {
        request.response().status(GrpcStatus.INVALID_ARGUMENT)
            .statusMessage("PutObject needs at least one chunk").end();
        return;
      }
      try (ObjectStore.Upload finished = state.upload) {
        if (!state.sawLast || state.crc.getValue() != (state.objectCrc & 0xFFFFFFFFL)) {
          throw new ChunkCorrupted("upload of " + state.key.id() + " failed its whole-object"
              + " CRC32C check (or lost its last chunk); nothing was stored");
        }
        ObjectKey stored = finished.commit();
        long mark = plane.journaling().mark();
        keep(caller, stored);
        replyJournaled(mark, request.response(), PutObjectReply.newBuilder()
            .setId(stored.id().hex()).setSize(store().size(stored)).build());
      } catch (ObjectStoreException e) {
        request.response().status(GrpcStatus.DATA_LOSS).statusMessage(e.getMessage()).end();
      }
    });
    // A client that dies mid-upload leaves nothing visible: the partial file goes away.
    request.exceptionHandler(error -> state.abort());
  }

  /**
   * Hands the reference a committed upload took to whoever keeps the object: the caller's
   * session, or for a worker's result the control plane, which claims it when the worker
   * reports the call. On the loop.
   */
  /** A data connection moved an object's bytes to or from the caller. On the loop. */
  public void movedOverDataPort(Caller caller, boolean toCaller, long bytes) {
    plane.objects().movedOverDataPort(bytes);
    if (toCaller && caller.worker()) {
      plane.objects().sentToWorker(bytes);
    }
  }

  public void keep(Caller caller, ObjectKey stored) {
    if (caller.worker()) {
      plane.uploaded(stored);
    } else {
      caller.session().adopt(stored);
    }
  }

  /**
   * {@link #keep}, and completes once the session's new hold is in the journal: the data port
   * acknowledges an upload only then. Fails with why the journal could not write it.
   */
  public java.util.concurrent.CompletableFuture<Void> keepJournaled(Caller caller,
      ObjectKey stored) {
    long mark = plane.journaling().mark();
    keep(caller, stored);
    return plane.journaling().durable(mark);
  }

  /**
   * Ends the call with {@code reply} once every hold taken since {@code mark} is in the journal
   * (docs/durability.md: an acknowledged change is on disk before the acknowledgement leaves),
   * at once when nothing was journaled; RESOURCE_EXHAUSTED with why when the journal could not
   * write it (a full disk): the client retries later, the hold lasts as long as the session.
   */
  private <T> void replyJournaled(long mark, GrpcServerResponse<?, T> response, T reply) {
    java.util.concurrent.CompletableFuture<Void> kept = plane.journaling().durable(mark);
    if (kept.isDone() && !kept.isCompletedExceptionally()) {
      response.end(reply);
      return;
    }
    io.vertx.core.Future.fromCompletionStage(kept, io.vertx.core.Vertx.currentContext())
        .onComplete(done -> {
          if (done.succeeded()) {
            response.end(reply);
          } else {
            response.status(GrpcStatus.RESOURCE_EXHAUSTED)
                .statusMessage(done.cause().getMessage()).end();
          }
        });
  }

  /** The gRPC status of a refused object call; the Python client maps these to its errors. */
  static GrpcStatus statusOf(Exception e) {
    return e instanceof StoreFullException ? GrpcStatus.RESOURCE_EXHAUSTED
        : e instanceof ChunkCorrupted ? GrpcStatus.DATA_LOSS : GrpcStatus.INVALID_ARGUMENT;
  }

  /**
   * Issues a ticket for one object's bytes on the bulk data port. A PUT reserves the room now
   * (StoreFull comes back here, as from PutObject); a GET checks the object is in the caller's
   * namespace. The connection then does what PutObject's chunks or GetObject's stream would.
   */
  public void openTransfer(Caller caller,
      GrpcServerRequest<OpenTransferRequest, OpenTransferReply> request) {
    request.handler(message -> {
      if (dataPort == 0) {
        request.response().status(GrpcStatus.UNIMPLEMENTED)
            .statusMessage("this runtime has no bulk data port; use PutObject/GetObject").end();
        return;
      }
      try {
        ObjectKey key = ObjectKey.of(caller.namespace(), message.getId());
        if (message.getDirection() == TransferDirection.TRANSFER_PUT) {
          caller.requireHolder();
          long size = message.getSize();
          ObjectStore.Upload upload = store().beginUpload(key, size);
          endTransfer(request, tickets.issue(BulkTickets.Direction.PUT, caller, key, size,
              upload), size);
        } else if (message.getDirection() == TransferDirection.TRANSFER_GET) {
          if (!(message.getDirect() && openDirect(caller, request, key))) {
            openGet(caller, request, key);
          }
        } else {
          throw new IllegalArgumentException("OpenTransfer needs a direction (PUT or GET)");
        }
      } catch (IllegalArgumentException | ObjectStoreException e) {
        request.response().status(statusOf(e)).statusMessage(e.getMessage()).end();
      }
    });
  }

  /**
   * A client that can reach workers' own data ports fetches a result kept only on a worker
   * from there, with a ticket for its session (docs/data-plane.md); false when no keeper
   * serves one (or the caller is a worker: its inputs come with RunCall).
   */
  private boolean openDirect(Caller caller,
      GrpcServerRequest<OpenTransferRequest, OpenTransferReply> request, ObjectKey key) {
    if (caller.worker() || caller.holds() == null) {
      return false;
    }
    return plane.objects().directForClient(key, "session:" + caller.holds().sessionId())
        .map(direct -> {
          request.response().end(OpenTransferReply.newBuilder().setDirect(direct)
              .setSize(plane.objects().size(key))
              .setExpiresInSeconds(tickets.ttl().toMillis() / 1000.0).build());
          return true;
        }).orElse(false);
  }

  /** A result kept on a remote worker comes to this store first, as for GetObject. */
  private void openGet(Caller caller,
      GrpcServerRequest<OpenTransferRequest, OpenTransferReply> request, ObjectKey key) {
    plane.objects().toHead(key).onComplete(pulled -> {
      if (pulled.failed()) {
        failPull(request.response(), pulled.cause());
        return;
      }
      long size;
      try {
        size = store().size(key);
      } catch (ObjectStoreException e) {
        request.response().status(GrpcStatus.NOT_FOUND).statusMessage(e.getMessage()).end();
        return;
      }
      endTransfer(request, tickets.issue(BulkTickets.Direction.GET, caller, key, size, null),
          size);
    });
  }

  private void endTransfer(GrpcServerRequest<OpenTransferRequest, OpenTransferReply> request,
      byte[] ticket, long size) {
    request.response().end(OpenTransferReply.newBuilder()
        .setTicket(com.google.protobuf.ByteString.copyFrom(ticket)).setSize(size)
        .setDataPort(dataPort).setExpiresInSeconds(tickets.ttl().toMillis() / 1000.0).build());
  }

  /** A chunk whose bytes do not match their checksum; the client retries the upload. */
  static final class ChunkCorrupted extends ObjectStoreException {
    ChunkCorrupted(String message) {
      super(message);
    }
  }

  private final class PutState {
    ObjectStore.Upload upload;
    ObjectKey key;
    final CRC32C crc = new CRC32C();
    int objectCrc;
    boolean sawLast;
    boolean failed;

    void accept(ObjectChunk chunk, String namespace) {
      if (upload == null) {
        key = ObjectKey.of(namespace, chunk.getId());
        upload = store().beginUpload(key, chunk.getSize());
      }
      ByteBuffer data = chunk.getData().asReadOnlyByteBuffer();
      if (chunk.getOffset() != upload.written()) {
        throw new ChunkCorrupted("upload of " + key.id() + ": chunk at offset "
            + chunk.getOffset() + " arrived when " + upload.written() + " bytes were written");
      }
      if (crc32c(data) != chunk.getCrc32C()) {
        throw new ChunkCorrupted("upload of " + key.id() + ": the chunk at offset "
            + chunk.getOffset() + " (" + data.remaining() + " bytes) failed its CRC32C check;"
            + " nothing was stored, send the object again");
      }
      crc.update(data.duplicate());
      upload.write(data);
      if (chunk.getLast()) {
        sawLast = true;
        objectCrc = chunk.getObjectCrc32C();
      }
    }

    void abort() {
      failed = true;
      if (upload != null) {
        upload.close();
      }
    }
  }

  /** Serves an object; one a remote worker kept is pulled into this store first. */
  public void getObject(Caller caller, GrpcServerRequest<GetObjectRequest, ObjectChunk> request) {
    request.handler(message -> {
      ObjectKey key;
      try {
        key = ObjectKey.of(caller.namespace(), message.getId());
      } catch (IllegalArgumentException e) {
        request.response().status(GrpcStatus.NOT_FOUND).statusMessage(e.getMessage()).end();
        return;
      }
      plane.objects().toHead(key).onComplete(pulled -> {
        if (pulled.failed()) {
          failPull(request.response(), pulled.cause());
        } else {
          send(caller, request, key, message.getOffset());
        }
      });
    });
  }

  /** A download of a result kept on a worker that could not be brought here. */
  private static void failPull(GrpcServerResponse<?, ?> response, Throwable cause) {
    if (cause instanceof ObjectDirectory.ObjectLostException) {
      response.trailers().set(FAILURE_TRAILER, "WORKER_LOST");
    }
    response.status(GrpcStatus.FAILED_PRECONDITION).statusMessage(cause.getMessage()).end();
  }

  private void send(Caller caller, GrpcServerRequest<GetObjectRequest, ObjectChunk> request,
      ObjectKey key, long offset) {
    ByteBuffer bytes;
    try {
      bytes = store().read(key);
    } catch (ObjectStoreException e) {
      request.response().status(GrpcStatus.NOT_FOUND).statusMessage(e.getMessage()).end();
      return;
    }
    if (offset < 0 || offset > bytes.remaining()) {
      request.response().status(GrpcStatus.OUT_OF_RANGE).statusMessage("offset " + offset
          + " is outside object " + key.id() + " of " + bytes.remaining() + " bytes").end();
      return;
    }
    if (caller.worker()) {
      plane.objects().sentToWorker(bytes.remaining() - offset);
    }
    new Sender(request.response(), key, bytes, (int) offset).pump();
  }

  /** Streams chunks as fast as the client's flow-control window allows, never buffering more. */
  private static final class Sender {
    private final GrpcServerResponse<GetObjectRequest, ObjectChunk> response;
    private final ObjectKey key;
    private final ByteBuffer bytes;
    private final long size;
    private boolean first = true;

    Sender(GrpcServerResponse<GetObjectRequest, ObjectChunk> response, ObjectKey key,
        ByteBuffer bytes, int offset) {
      this.response = response;
      this.key = key;
      this.size = bytes.remaining();
      this.bytes = bytes.position(offset);
    }

    void pump() {
      while (first || bytes.hasRemaining()) {
        if (response.writeQueueFull()) {
          response.drainHandler(ignored -> pump());
          return;
        }
        long offset = bytes.position();
        ByteBuffer slice = bytes.slice();
        slice.limit(Math.min(CHUNK_BYTES, bytes.remaining()));
        bytes.position(bytes.position() + slice.remaining());
        // The mapped file is wrapped, not copied: it stays alive while the chunk is queued.
        ObjectChunk.Builder chunk = ObjectChunk.newBuilder()
            .setData(UnsafeByteOperations.unsafeWrap(slice.duplicate()))
            .setOffset(offset).setCrc32C(crc32c(slice)).setLast(!bytes.hasRemaining());
        if (first) {
          chunk.setId(key.id().hex()).setSize(size);
          first = false;
        }
        response.write(chunk.build());
      }
      response.end();
    }
  }

  public void hasObjects(Caller caller, GrpcServerRequest<HasObjectsRequest, HasObjectsReply> request) {
    SessionHolds holds = caller.worker() ? null : caller.session();
    request.handler(message -> {
      HasObjectsReply.Builder reply = HasObjectsReply.newBuilder();
      long mark = plane.journaling().mark();
      boolean staging = holds != null && message.getWriteSizesCount() > 0;
      try {
        if (staging && message.getWriteSizesCount() != message.getIdsCount()) {
          throw new IllegalArgumentException("write_sizes must have one size per id: "
              + message.getIdsCount() + " ids, " + message.getWriteSizesCount() + " sizes");
        }
        List<ObjectId> mapped = staging ? message.getMappedIdsList().stream()
            .map(ObjectId::parse).toList() : List.of();
        for (int i = 0; i < message.getIdsCount(); i++) {
          ObjectKey key = ObjectKey.of(caller.namespace(), message.getIds(i));
          boolean present = holds == null ? store().contains(key)
              : plane.objects().retainIfPresent(key);
          if (present && holds != null) {
            holds.adopt(key);
          }
          reply.addPresent(present);
          if (staging) {
            reply.addStagedNames(present ? ""
                : recycledFile(caller, holds, message.getWriteSizes(i), mapped,
                    message.getSpareReady()));
          }
        }
      } catch (IllegalArgumentException | ObjectStoreException e) {
        request.response().status(GrpcStatus.INVALID_ARGUMENT).statusMessage(e.getMessage()).end();
        return;
      }
      replyJournaled(mark, request.response(), reply.build());
    });
  }

  /**
   * A staged file holding reused memory for a same-host write: a released object's, else (when
   * the writer has no spare of its own ready) a pre-faulted one of the host's arena; or "" (the
   * writer writes a new file).
   */
  private String recycledFile(Caller caller, SessionHolds holds, long size,
      List<ObjectId> mapped, boolean spareReady) {
    if (size < RECYCLE_MIN_BYTES) {
      return "";
    }
    String name = SessionHolds.stagedPrefix(holds.sessionId()) + "r" + UUID.randomUUID();
    return store().stageRecycled(caller.namespace(), size, mapped, spareReady, name)
        || !spareReady && store().handOutSpare(caller.namespace(), size, name).size() > 0
        ? name : "";
  }

  public void adoptObject(Caller caller, GrpcServerRequest<AdoptObjectRequest, PutObjectReply> request) {
    SessionHolds holds = caller.session();
    String prefix = SessionHolds.stagedPrefix(holds.sessionId());
    request.handler(message -> {
      try {
        String name = message.getStagedName();
        if (!name.startsWith(prefix) || name.contains("/")) {
          throw new IllegalArgumentException("staged_name must be a file name starting with "
              + prefix + ", got " + name);
        }
        ObjectKey key = ObjectKey.of(caller.namespace(), message.getId());
        Path staged = store().stagingFolderOf(key.namespace()).resolve(name);
        ObjectKey stored = store().adopt(key, staged);
        long mark = plane.journaling().mark();
        holds.adopt(stored);
        replyJournaled(mark, request.response(), PutObjectReply.newBuilder()
            .setId(stored.id().hex()).setSize(store().size(stored)).build());
      } catch (IllegalArgumentException | ObjectStoreException e) {
        request.response().status(statusOf(e)).statusMessage(e.getMessage()).end();
      }
    });
  }
}
