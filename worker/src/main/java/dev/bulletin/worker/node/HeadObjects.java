package dev.bulletin.worker.node;

import com.google.protobuf.ByteString;
import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.bridge.ObjectStoreException;
import dev.bulletin.bridge.dataport.TlsEngines;
import dev.bulletin.protocol.GetObjectRequest;
import dev.bulletin.protocol.ObjectChunk;
import dev.bulletin.protocol.OpenTransferReply;
import dev.bulletin.protocol.OpenTransferRequest;
import dev.bulletin.protocol.PutObjectReply;
import dev.bulletin.protocol.TransferDirection;
import dev.bulletin.worker.ProtoCodec;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import io.vertx.core.net.SocketAddress;
import io.vertx.grpc.client.GrpcClient;
import io.vertx.grpc.client.GrpcClientRequest;
import io.vertx.grpc.common.GrpcStatus;
import io.vertx.grpc.common.ServiceMethod;
import io.vertx.grpc.common.ServiceName;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.logging.Logger;
import java.util.zip.CRC32C;

/**
 * Moves objects between a worker's store and the runtime's, into the local store (visible only
 * once complete and verified) and out of it. Over the runtime's bulk data port when it has one
 * (OpenTransfer issues a ticket, {@link BulkClient} moves the bytes on a blocking thread: raw
 * TCP, received straight into reused memory, sendfile), else, or when that port cannot be
 * reached from here, as GetObject and PutObject chunks with flow control.
 */
final class HeadObjects {
  private static final Logger LOG = Logger.getLogger(HeadObjects.class.getName());

  private static final ServiceName SERVICE = ServiceName.create("bulletin.v1.Bulletin");
  private static final ServiceMethod<ObjectChunk, GetObjectRequest> GET = ServiceMethod.client(
      SERVICE, "GetObject", ProtoCodec.encoder(),
      ProtoCodec.decoder(ObjectChunk.newBuilder()));
  private static final ServiceMethod<PutObjectReply, ObjectChunk> PUT = ServiceMethod.client(
      SERVICE, "PutObject", ProtoCodec.encoder(),
      ProtoCodec.decoder(PutObjectReply.newBuilder()));
  private static final ServiceMethod<OpenTransferReply, OpenTransferRequest> OPEN_TRANSFER =
      ServiceMethod.client(SERVICE, "OpenTransfer", ProtoCodec.encoder(),
          ProtoCodec.decoder(OpenTransferReply.newBuilder()));
  /** Tries of a bulk transfer whose bytes failed their check (the Python client's number). */
  static final int BULK_TRIES = 3;
  static final int CHUNK_BYTES = 1 << 20;
  /** Names the call owner's namespace: the runtime keeps objects per user. */
  static final String NAMESPACE_HEADER = "bulletin-namespace";

  private final Vertx vertx;
  private final GrpcClient client;
  private final SocketAddress head;
  private final String authorization;
  private final ObjectStore store;
  /** Null once the bulk port is known to be absent or unreachable: chunks from then on. */
  private volatile BulkClient bulk;
  private final BulkClient bulkClient;

  /**
   * @param bulk whether to use the runtime's bulk data port when it has one
   * @param dataTls the TLS engines of data connections; null when the runtime speaks plaintext
   */
  HeadObjects(Vertx vertx, GrpcClient client, SocketAddress head, String token,
      ObjectStore store, boolean bulk, TlsEngines dataTls) {
    this.vertx = vertx;
    this.client = client;
    this.head = head;
    this.authorization = token.isEmpty() ? null : "Bearer " + token;
    this.store = store;
    this.bulkClient = bulk ? new BulkClient(store, dataTls) : null;
    this.bulk = bulkClient;
  }

  /**
   * Fetches an object from the runtime into the local store, with one reference on it. Its
   * CRC32C is checked; a bad one fails the fetch and nothing becomes visible.
   */
  Future<ObjectKey> fetch(ObjectKey id, long size) {
    return overBulk(TransferDirection.TRANSFER_GET, id, size, 1,
        (port, ticket) -> port.get(dataAddress(ticket), ticket.getTicket().toByteArray(), id))
        .recover(error -> error instanceof NoBulkPort ? fetchChunks(id, size)
            : Future.failedFuture(error));
  }

  /**
   * Uploads a local object to the runtime, into its owner's namespace there; completes with
   * the key the runtime stored.
   */
  Future<ObjectKey> upload(ObjectKey local) {
    long size = store.size(local);
    return overBulk(TransferDirection.TRANSFER_PUT, local, size, 1, (port, ticket) -> {
      port.put(dataAddress(ticket), ticket.getTicket().toByteArray(), local);
      return local;
    }).recover(error -> error instanceof NoBulkPort ? uploadChunks(local)
        : Future.failedFuture(error));
  }

  /** The bytes of one bulk transfer, moved on a blocking thread with the runtime's ticket. */
  private interface BulkStep {
    ObjectKey run(BulkClient port, OpenTransferReply ticket) throws Exception;
  }

  /** Fails a bulk attempt that should go over gRPC chunks instead. */
  private static final class NoBulkPort extends Exception {
    NoBulkPort() {
      super("the runtime has no bulk data port", null, false, false);
    }
  }

  private Future<ObjectKey> overBulk(TransferDirection direction, ObjectKey key, long size,
      int attempt, BulkStep step) {
    BulkClient port = bulk;
    if (port == null) {
      return Future.failedFuture(new NoBulkPort());
    }
    return openTransfer(direction, key, size)
        .compose(ticket -> vertx.<ObjectKey>executeBlocking(() -> step.run(port, ticket), false))
        .recover(error -> {
          if (error instanceof BulkClient.RefusedException refused && refused.corrupt()
              && attempt < BULK_TRIES) {
            return overBulk(direction, key, size, attempt + 1, step);
          }
          if (error instanceof BulkClient.UnreachableException
              || error instanceof NoBulkPort) {
            if (bulk != null) {
              LOG.warning(error.getMessage() + "; moving objects over gRPC from now on");
            }
            bulk = null;
            return Future.failedFuture(new NoBulkPort());
          }
          return Future.failedFuture(error);
        });
  }

  private InetSocketAddress dataAddress(OpenTransferReply ticket) {
    return new InetSocketAddress(head.host(), ticket.getDataPort());
  }

  /** A ticket for one transfer; fails with NoBulkPort when the runtime has no data port. */
  private Future<OpenTransferReply> openTransfer(TransferDirection direction, ObjectKey key,
      long size) {
    return client.request(head, OPEN_TRANSFER).compose(request -> {
      if (authorization != null) { // else the worker's certificate says who it is
        request.headers().set("authorization", authorization);
      }
      request.headers().set(NAMESPACE_HEADER, key.namespace());
      return request.send(OpenTransferRequest.newBuilder().setDirection(direction)
          .setId(key.id().hex()).setSize(size).build());
    }).compose(response -> {
      Promise<OpenTransferReply> reply = Promise.promise();
      response.handler(reply::tryComplete);
      response.endHandler(ignored -> {
        if (response.status() == GrpcStatus.UNIMPLEMENTED) {
          reply.tryFail(new NoBulkPort());
        } else if (response.status() != GrpcStatus.OK) {
          reply.tryFail(new ObjectStoreException("the runtime refused to move " + key + ": "
              + response.status() + " " + response.statusMessage()));
        } else {
          reply.tryFail("the runtime answered OpenTransfer with no ticket");
        }
      });
      response.exceptionHandler(reply::tryFail);
      return reply.future();
    });
  }

  /** GetObject chunks, each CRC32C-checked. */
  private Future<ObjectKey> fetchChunks(ObjectKey id, long size) {
    return client.request(head, GET).compose(request -> {
      if (authorization != null) { // else the worker's certificate says who it is
        request.headers().set("authorization", authorization);
      }
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

  /** PutObject chunks with a CRC32C each and one over the whole object. */
  private Future<ObjectKey> uploadChunks(ObjectKey local) {
    ByteBuffer bytes = store.read(local);
    return client.request(head, PUT).compose(request -> {
      if (authorization != null) { // else the worker's certificate says who it is
        request.headers().set("authorization", authorization);
      }
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

  void close() {
    if (bulkClient != null) {
      bulkClient.close();
    }
  }
}
