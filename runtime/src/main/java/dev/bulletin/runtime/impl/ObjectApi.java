package dev.bulletin.runtime.impl;

import com.google.protobuf.UnsafeByteOperations;
import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.bridge.ObjectStoreException;
import dev.bulletin.bridge.StoreFullException;
import dev.bulletin.protocol.AdoptObjectRequest;
import dev.bulletin.protocol.GetObjectRequest;
import dev.bulletin.protocol.HasObjectsReply;
import dev.bulletin.protocol.HasObjectsRequest;
import dev.bulletin.protocol.ObjectChunk;
import dev.bulletin.protocol.PutObjectReply;
import dev.bulletin.runtime.identity.Identity;
import io.vertx.grpc.common.GrpcStatus;
import io.vertx.grpc.server.GrpcServerRequest;
import io.vertx.grpc.server.GrpcServerResponse;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.zip.CRC32C;

/**
 * The object RPCs: chunked upload and download with a CRC32C per chunk and one over the whole
 * object, "has it?", and adoption of files a same-host client wrote into its store folder. Every
 * object is looked up in the caller's namespace only. Handlers run on the control plane's loop.
 */
final class ObjectApi {
  static final int CHUNK_BYTES = 1 << 20;

  private final ControlPlane plane;
  private final Sessions sessions;

  ObjectApi(ControlPlane plane, Sessions sessions) {
    this.plane = plane;
    this.sessions = sessions;
  }

  private ObjectStore store() {
    return plane.store();
  }

  private static String namespace(Identity identity) {
    return ObjectKey.namespaceOf(identity.user());
  }

  static int crc32c(ByteBuffer data) {
    CRC32C crc = new CRC32C();
    crc.update(data.duplicate());
    return (int) crc.getValue();
  }

  void putObject(Identity identity, String sessionId,
      GrpcServerRequest<ObjectChunk, PutObjectReply> request) {
    SessionHolds holds = sessions.holds(sessionId, identity);
    PutState state = new PutState();
    request.handler(chunk -> {
      if (state.failed) {
        return;
      }
      try {
        state.accept(chunk, identity);
      } catch (IllegalArgumentException | ObjectStoreException e) {
        state.abort();
        GrpcStatus status = e instanceof StoreFullException ? GrpcStatus.RESOURCE_EXHAUSTED
            : e instanceof ChunkCorrupted ? GrpcStatus.DATA_LOSS : GrpcStatus.INVALID_ARGUMENT;
        request.response().status(status).statusMessage(e.getMessage()).end();
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
        holds.adopt(stored);
        request.response().end(PutObjectReply.newBuilder().setId(stored.id().hex())
            .setSize(store().size(stored)).build());
      } catch (ObjectStoreException e) {
        request.response().status(GrpcStatus.DATA_LOSS).statusMessage(e.getMessage()).end();
      }
    });
    // A client that dies mid-upload leaves nothing visible: the partial file goes away.
    request.exceptionHandler(error -> state.abort());
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

    void accept(ObjectChunk chunk, Identity identity) {
      if (upload == null) {
        key = ObjectKey.of(namespace(identity), chunk.getId());
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

  void getObject(Identity identity, GrpcServerRequest<GetObjectRequest, ObjectChunk> request) {
    request.handler(message -> {
      ObjectKey key;
      ByteBuffer bytes;
      try {
        key = ObjectKey.of(namespace(identity), message.getId());
        bytes = store().read(key);
      } catch (IllegalArgumentException | ObjectStoreException e) {
        request.response().status(GrpcStatus.NOT_FOUND).statusMessage(e.getMessage()).end();
        return;
      }
      long offset = message.getOffset();
      if (offset < 0 || offset > bytes.remaining()) {
        request.response().status(GrpcStatus.OUT_OF_RANGE).statusMessage("offset " + offset
            + " is outside object " + key.id() + " of " + bytes.remaining() + " bytes").end();
        return;
      }
      new Sender(request.response(), key, bytes, (int) offset).pump();
    });
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

  void hasObjects(Identity identity, String sessionId,
      GrpcServerRequest<HasObjectsRequest, HasObjectsReply> request) {
    SessionHolds holds = sessions.holds(sessionId, identity);
    request.handler(message -> {
      HasObjectsReply.Builder reply = HasObjectsReply.newBuilder();
      try {
        for (String id : message.getIdsList()) {
          ObjectKey key = ObjectKey.of(namespace(identity), id);
          boolean present = store().retainIfPresent(key);
          if (present) {
            holds.adopt(key);
          }
          reply.addPresent(present);
        }
      } catch (IllegalArgumentException e) {
        request.response().status(GrpcStatus.INVALID_ARGUMENT).statusMessage(e.getMessage()).end();
        return;
      }
      request.response().end(reply.build());
    });
  }

  void adoptObject(Identity identity, String sessionId,
      GrpcServerRequest<AdoptObjectRequest, PutObjectReply> request) {
    SessionHolds holds = sessions.holds(sessionId, identity);
    request.handler(message -> {
      try {
        String name = message.getStagedName();
        if (!name.startsWith(SessionHolds.stagedPrefix(sessionId)) || name.contains("/")) {
          throw new IllegalArgumentException("staged_name must be a file name starting with "
              + SessionHolds.stagedPrefix(sessionId) + ", got " + name);
        }
        ObjectKey key = ObjectKey.of(namespace(identity), message.getId());
        Path staged = store().folderOf(key.namespace()).resolve(name);
        ObjectKey stored = store().adopt(key, staged);
        holds.adopt(stored);
        request.response().end(PutObjectReply.newBuilder().setId(stored.id().hex())
            .setSize(store().size(stored)).build());
      } catch (IllegalArgumentException | ObjectStoreException e) {
        GrpcStatus status = e instanceof StoreFullException ? GrpcStatus.RESOURCE_EXHAUSTED
            : GrpcStatus.INVALID_ARGUMENT;
        request.response().status(status).statusMessage(e.getMessage()).end();
      }
    });
  }
}
