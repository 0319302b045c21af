package dev.bulletin.runtime.node;

import com.google.protobuf.ByteString;
import dev.bulletin.bridge.ObjectKey;
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
import java.util.zip.CRC32C;

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
  /** Names the call owner's namespace: the runtime keeps objects per user. */
  static final String NAMESPACE_HEADER = "bulletin-namespace";

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

  /**
   * Fetches an object from the runtime into the local store, with one reference on it. Every
   * chunk's CRC32C is checked; a bad one fails the fetch and nothing becomes visible.
   */
  Future<ObjectKey> fetch(ObjectKey id, long size) {
    return client.request(head, GET).compose(request -> {
      request.headers().set("authorization", authorization);
      request.headers().set(NAMESPACE_HEADER, id.namespace());
      return request.send(GetObjectRequest.newBuilder().setId(id.id().hex()).build());
    }).compose(response -> {
      Promise<ObjectKey> done = Promise.promise();
      ObjectStore.Upload upload = store.beginUpload(id, size);
      response.handler(chunk -> {
        try {
          ByteBuffer data = chunk.getData().asReadOnlyByteBuffer();
          if (crc32c(data) != chunk.getCrc32C()) {
            throw new IllegalStateException("chunk at offset " + chunk.getOffset() + " of "
                + id.id() + " failed its CRC32C check");
          }
          upload.write(data);
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
   * Uploads a local object to the runtime, into its owner's namespace there, in chunks with a
   * CRC32C each and one over the whole object; completes with the key the runtime stored.
   */
  Future<ObjectKey> upload(ObjectKey local) {
    ByteBuffer bytes = store.read(local);
    return client.request(head, PUT).compose(request -> {
      request.headers().set("authorization", authorization);
      request.headers().set(NAMESPACE_HEADER, local.namespace());
      Promise<Void> written = Promise.promise();
      pump(request, local, bytes, bytes.remaining(), new CRC32C(), written);
      return written.future().compose(ignored -> request.response());
    }).compose(response -> response.last().map(reply -> ObjectKey.of(local.namespace(),
        reply.getId())));
  }

  private void pump(GrpcClientRequest<ObjectChunk, PutObjectReply> request, ObjectKey id,
      ByteBuffer bytes, long size, CRC32C whole, Promise<Void> written) {
    while ((bytes.position() == 0 || bytes.hasRemaining()) && !request.writeQueueFull()) {
      long offset = bytes.position();
      ByteBuffer slice = bytes.slice();
      slice.limit(Math.min(CHUNK_BYTES, bytes.remaining()));
      bytes.position(bytes.position() + slice.remaining());
      whole.update(slice.duplicate());
      boolean last = !bytes.hasRemaining();
      int crc = crc32c(slice); // before copyFrom, which consumes the slice
      ObjectChunk.Builder chunk = ObjectChunk.newBuilder().setData(ByteString.copyFrom(slice))
          .setOffset(offset).setCrc32C(crc).setLast(last);
      if (offset == 0) {
        chunk.setId(id.id().hex()).setSize(size);
      }
      if (last) {
        chunk.setObjectCrc32C((int) whole.getValue());
        request.write(chunk.build());
        break;
      }
      request.write(chunk.build());
    }
    if (bytes.hasRemaining()) {
      request.drainHandler(ignored -> pump(request, id, bytes, size, whole, written));
      return;
    }
    request.end().onComplete(written);
  }

  static int crc32c(ByteBuffer data) {
    CRC32C crc = new CRC32C();
    crc.update(data.duplicate());
    return (int) crc.getValue();
  }
}
