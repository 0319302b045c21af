package dev.bulletin.runtime.node;

import com.google.protobuf.ByteString;
import dev.bulletin.bridge.ObjectId;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.protocol.GetObjectRequest;
import dev.bulletin.protocol.ObjectChunk;
import dev.bulletin.protocol.PutObjectReply;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.net.SocketAddress;
import io.vertx.grpc.client.GrpcClient;
import io.vertx.grpc.client.GrpcClientRequest;
import io.vertx.grpc.common.GrpcMessageDecoder;
import io.vertx.grpc.common.GrpcMessageEncoder;
import io.vertx.grpc.common.GrpcStatus;
import io.vertx.grpc.common.ServiceMethod;
import io.vertx.grpc.common.ServiceName;
import java.nio.ByteBuffer;

/**
 * Moves objects between a worker's store and the runtime's: GetObject into the local store
 * (visible only once complete and verified), PutObject out of it, in chunks with flow control.
 */
final class HeadObjects {

  private static final ServiceName SERVICE = ServiceName.create("bulletin.v1.Bulletin");
  private static final ServiceMethod<ObjectChunk, GetObjectRequest> GET = ServiceMethod.client(
      SERVICE, "GetObject", GrpcMessageEncoder.encoder(),
      GrpcMessageDecoder.decoder(ObjectChunk.newBuilder()));
  private static final ServiceMethod<PutObjectReply, ObjectChunk> PUT = ServiceMethod.client(
      SERVICE, "PutObject", GrpcMessageEncoder.encoder(),
      GrpcMessageDecoder.decoder(PutObjectReply.newBuilder()));
  static final int CHUNK_BYTES = 1 << 20;

  private final GrpcClient client;
  private final SocketAddress head;
  private final String authorization;
  private final ObjectStore store;

  HeadObjects(GrpcClient client, SocketAddress head, String token, ObjectStore store) {
    this.client = client;
    this.head = head;
    this.authorization = "Bearer " + token;
    this.store = store;
  }

  /** Fetches an object from the runtime into the local store, with one reference on it. */
  Future<ObjectId> fetch(ObjectId id, long size) {
    return client.request(head, GET).compose(request -> {
      request.headers().set("authorization", authorization);
      return request.send(GetObjectRequest.newBuilder().setId(id.hex()).build());
    }).compose(response -> {
      Promise<ObjectId> done = Promise.promise();
      ObjectStore.Upload upload = store.beginUpload(id, size);
      response.handler(chunk -> {
        try {
          upload.write(chunk.getData().asReadOnlyByteBuffer());
        } catch (RuntimeException e) {
          upload.close();
          done.tryFail(e);
        }
      });
      response.endHandler(ignored -> {
        if (response.status() != GrpcStatus.OK) {
          upload.close();
          done.tryFail("the runtime refused object " + id + ": " + response.status() + " "
              + response.statusMessage());
          return;
        }
        try (upload) {
          done.tryComplete(upload.commit());
        } catch (RuntimeException e) {
          done.tryFail(e);
        }
      });
      response.exceptionHandler(error -> {
        upload.close();
        done.tryFail(error);
      });
      return done.future();
    });
  }

  /**
   * Uploads a local object to the runtime under the id of its content ({@code as}), which the
   * runtime checks; completes with the id the runtime stored.
   */
  Future<ObjectId> upload(ObjectId local, ObjectId as) {
    ByteBuffer bytes = store.read(local);
    ObjectId id = as;
    return client.request(head, PUT).compose(request -> {
      request.headers().set("authorization", authorization);
      Promise<Void> written = Promise.promise();
      pump(request, id, bytes, bytes.remaining(), true, written);
      return written.future().compose(ignored -> request.response());
    }).compose(response -> response.last().map(reply -> ObjectId.parse(reply.getId())));
  }

  private void pump(GrpcClientRequest<ObjectChunk, PutObjectReply> request, ObjectId id,
      ByteBuffer bytes, long size, boolean first, Promise<Void> written) {
    boolean isFirst = first;
    while ((isFirst || bytes.hasRemaining()) && !request.writeQueueFull()) {
      ByteBuffer slice = bytes.slice();
      slice.limit(Math.min(CHUNK_BYTES, bytes.remaining()));
      bytes.position(bytes.position() + slice.remaining());
      ObjectChunk.Builder chunk = ObjectChunk.newBuilder().setData(ByteString.copyFrom(slice));
      if (isFirst) {
        chunk.setId(id.hex()).setSize(size);
        isFirst = false;
      }
      request.write(chunk.build());
    }
    if (bytes.hasRemaining()) {
      boolean firstSent = !isFirst;
      request.drainHandler(ignored -> pump(request, id, bytes, size, !firstSent, written));
      return;
    }
    request.end().onComplete(written);
  }
}
