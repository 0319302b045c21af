package dev.bulletin.runtime.harness;

import dev.bulletin.runtime.control.OnLoop;
import io.vertx.core.Context;
import io.vertx.core.Vertx;
import io.vertx.core.VertxOptions;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.net.NetClient;
import io.vertx.core.net.NetServer;
import io.vertx.core.net.NetSocket;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * The peer that {@code make bench-scale} puts beside the runtime: what one loopback write costs
 * the writer when it goes to one of {@code connections} sockets in turn, at the pace the runtime
 * wrote to its users, with no runtime at all. One Vert.x event loop writes (as the runtime's
 * control-plane loop does), raw TCP through Netty, one small message per write and a flush each;
 * the readers sit on event loops of another Vert.x, as {@link BenchUsers}' clients do. The
 * writer's CPU per write is the floor under a call whose end goes to its user in a message of
 * its own: on loopback it includes the receiving side's TCP input and the wake-up of the
 * reader's thread, which on a real network the receiving host pays.
 */
final class LoopbackWrites {

  /** What a write cost the writing thread, in microseconds of CPU, and the kernel's part. */
  record Cost(double cpuMicrosPerWrite, double kernelMicrosPerWrite) {}

  private static final int MESSAGE_BYTES = 120; // about a FINISHED event with a small result
  private static final int WRITES_PER_TICK = 10;

  private LoopbackWrites() {}

  /** {@code writes} writes spread over {@code connections} sockets, {@code perSecond} a second. */
  static Cost measure(int connections, int writes, int perSecond, int readerLoops)
      throws Exception {
    Vertx writer = Vertx.vertx(new VertxOptions().setEventLoopPoolSize(1));
    Vertx readers = Vertx.vertx(new VertxOptions().setEventLoopPoolSize(readerLoops));
    try {
      List<NetSocket> sockets = new ArrayList<>();
      CompletableFuture<Void> allAccepted = new CompletableFuture<>();
      NetServer server = writer.createNetServer().connectHandler(socket -> {
        sockets.add(socket);
        if (sockets.size() == connections) {
          allAccepted.complete(null);
        }
      });
      int port = server.listen(0, "127.0.0.1").toCompletionStage().toCompletableFuture()
          .get(30, TimeUnit.SECONDS).actualPort();
      NetClient client = readers.createNetClient();
      for (int i = 0; i < connections; i++) {
        client.connect(port, "127.0.0.1").onSuccess(socket -> socket.handler(bytes -> { }));
      }
      allAccepted.get(60, TimeUnit.SECONDS);
      Context loop = writer.getOrCreateContext(); // on the one loop, the sockets' own
      long thread = OnLoop.call(loop, () -> Thread.currentThread().getId());
      ThreadMXBean cpu = ManagementFactory.getThreadMXBean();
      Buffer message = Buffer.buffer(new byte[MESSAGE_BYTES]);
      long cpuBefore = cpu.getThreadCpuTime(thread);
      long userBefore = cpu.getThreadUserTime(thread);
      CompletableFuture<Void> done = new CompletableFuture<>();
      long tickMillis = Math.max(1, 1000L * WRITES_PER_TICK / perSecond);
      loop.runOnContext(ignored -> writer.setPeriodic(tickMillis, new io.vertx.core.Handler<>() {
        private int next;

        @Override
        public void handle(Long timer) {
          for (int i = 0; i < WRITES_PER_TICK && next < writes; i++, next++) {
            sockets.get(next % connections).write(message);
          }
          if (next >= writes) {
            writer.cancelTimer(timer);
            done.complete(null);
          }
        }
      }));
      done.get(10L * writes / perSecond + 60, TimeUnit.SECONDS);
      long cpuNanos = cpu.getThreadCpuTime(thread) - cpuBefore;
      long userNanos = cpu.getThreadUserTime(thread) - userBefore;
      // User time comes in 10 ms ticks and can read above the CPU time of a short run.
      return new Cost(cpuNanos / 1e3 / writes, Math.max(0, cpuNanos - userNanos) / 1e3 / writes);
    } finally {
      readers.close().toCompletionStage().toCompletableFuture().get(30, TimeUnit.SECONDS);
      writer.close().toCompletionStage().toCompletableFuture().get(30, TimeUnit.SECONDS);
    }
  }
}
