package dev.bulletin.runtime.objects;

import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.bridge.ObjectStoreException;
import dev.bulletin.bridge.StoreArena;
import dev.bulletin.protocol.ArenaSpareReply;
import dev.bulletin.protocol.ArenaSpareRequest;
import dev.bulletin.runtime.api.SessionHolds;
import io.vertx.grpc.common.GrpcStatus;
import io.vertx.grpc.server.GrpcServerRequest;
import java.util.UUID;
import java.util.function.Supplier;

/**
 * TakeArenaSpare: a same-host client's spares come from the host's store arena (one budget for
 * the host, filled once by the runtime), moved into that client's own store folder. Each file is
 * named after the caller's session, so the session's end deletes what the client did not use.
 */
public final class ArenaSpares {
  /** Spares at rest carry this after the session prefix: not yet a write in progress. */
  public static final String SPARE_INFIX = "spare-";

  private final Supplier<ObjectStore> store;

  public ArenaSpares(Supplier<ObjectStore> store) {
    this.store = store;
  }

  /**
   * The host arena's budget (HelloReply.host_arena_bytes; what one client may keep ahead of
   * need, arena_bytes, is {@link ObjectStore#writerSpareBytes}); 0 without an arena.
   */
  public long budgetBytes() {
    StoreArena arena = store.get().arena();
    return arena == null ? 0 : arena.stats().budgetBytes();
  }

  public void take(ObjectApi.Caller caller,
      GrpcServerRequest<ArenaSpareRequest, ArenaSpareReply> request) {
    request.handler(message -> {
      try {
        if (caller.worker()) {
          throw new IllegalArgumentException("arena spares are for same-host clients' sessions,"
              + " not for workers");
        }
        SessionHolds holds = caller.session();
        if (message.getSize() <= 0) {
          throw new IllegalArgumentException("size must be > 0 (the bytes the spare must hold),"
              + " got " + message.getSize());
        }
        String name = SessionHolds.stagedPrefix(holds.sessionId()) + SPARE_INFIX
            + UUID.randomUUID();
        StoreArena.Handout handout = store.get().handOutSpare(caller.namespace(),
            message.getSize(), name);
        ArenaSpareReply.Builder reply = ArenaSpareReply.newBuilder().setSize(handout.size())
            .setLater(handout.later());
        if (handout.size() > 0) {
          reply.setStagedName(name);
        }
        request.response().end(reply.build());
      } catch (IllegalArgumentException | ObjectStoreException e) {
        request.response().status(GrpcStatus.INVALID_ARGUMENT).statusMessage(e.getMessage())
            .end();
      }
    });
  }
}
