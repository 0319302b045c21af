package dev.bulletin.worker.node;

import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.bridge.ObjectStores;
import dev.bulletin.bridge.StoreOptions;
import dev.bulletin.bridge.dataport.DirectTicket;
import dev.bulletin.worker.tls.JdkContexts;
import dev.bulletin.worker.tls.PinnedTrust;
import dev.bulletin.worker.tls.PortIdentity;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HexFormat;
import java.util.Random;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLServerSocket;
import javax.net.ssl.SSLSocket;

/**
 * Where a direct transfer's time goes, in one process on loopback (no executor, no scheduling):
 * a worker's port (plaintext and TLS) into a store, fresh pages and reused ones, against a raw
 * TCP stream and a TLS socket stream of the same size read into one reused buffer. Prints GB/s
 * per path, paired rounds, and the CPU seconds per GiB both sides spent together (steadier than
 * the wall clock on a shared machine). Not a test:
 * {@code java -cp ... DirectPortBenchmark [MiB] [rounds] [raw,plain,tls]}.
 */
public final class DirectPortBenchmark {
  private DirectPortBenchmark() {}

  public static void main(String[] args) throws Exception {
    int mib = args.length > 0 ? Integer.parseInt(args[0]) : 1024;
    int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 3;
    String only = args.length > 2 ? args[2] : "";
    long size = (long) mib << 20;
    Path base = Files.createTempDirectory(Path.of("/dev/shm"), "bulletin-bench-");
    PortIdentity identity = PortIdentity.generate("bench");
    PinnedTrust pins = new PinnedTrust();
    byte[] key = DirectTicket.newKey();
    try (ObjectStore keeperStore = ObjectStores.open(new StoreOptions(base.resolve("a"),
            4 * size, null));
        ObjectStore readerStore = ObjectStores.open(new StoreOptions(base.resolve("b"),
            4 * size, null));
        DirectPort plain = DirectPort.start("127.0.0.1", keeperStore, null);
        DirectPort tls = DirectPort.start("127.0.0.1", keeperStore, identity.serverEngines());
        BulkClient reader = new BulkClient(readerStore, null)) {
      plain.ticketKey(key);
      tls.ticketKey(key);
      ObjectKey object = fill(keeperStore, size);
      for (int round = 0; round < rounds; round++) {
        System.out.printf("round %d%n", round);
        cpuBefore = OS.getProcessCpuTime();
        if (only.isEmpty() || only.contains("raw")) {
          report("raw TCP stream", size, rawTcp(size));
          cpuBefore = OS.getProcessCpuTime();
          report("TLS socket stream (JDK)", size, tlsStream(size, identity, pins));
        }
        for (boolean fresh : new boolean[] {true, false}) {
          for (boolean withTls : new boolean[] {false, true}) {
            if (!only.isEmpty() && !only.contains(withTls ? "tls" : "plain")) {
              continue;
            }
            if (fresh) {
              readerStore.dropUnreferencedObjects(); // no released file to reuse
            }
            DirectPort port = withTls ? tls : plain;
            byte[] request = DirectTicket.request("bench-b", object, DirectTicket.sign(key,
                object, "bench-b", System.currentTimeMillis() + 60_000));
            cpuBefore = OS.getProcessCpuTime();
            long start = System.nanoTime();
            ObjectKey got = reader.getDirect(new InetSocketAddress("127.0.0.1", port.port()),
                request, object, withTls ? pins.enginesFor(identity.fingerprint()) : null);
            long nanos = System.nanoTime() - start;
            readerStore.release(got); // kept: the next upload of its size reuses the file
            report("direct " + (withTls ? "TLS  " : "plain") + (fresh ? " fresh pages"
                : " reused pages"), size, nanos);
          }
        }
      }
    } finally {
      try (var walk = Files.walk(base)) {
        walk.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
      }
    }
  }

  private static ObjectKey fill(ObjectStore store, long size) {
    byte[] id = new byte[16];
    new Random(5).nextBytes(id);
    ObjectKey key = ObjectKey.of("bench", HexFormat.of().formatHex(id));
    ByteBuffer chunk = ByteBuffer.allocateDirect(4 << 20);
    Random random = new Random(9);
    byte[] bytes = new byte[chunk.capacity()];
    random.nextBytes(bytes);
    try (ObjectStore.Upload upload = store.beginUpload(key, size)) {
      for (long at = 0; at < size; at += chunk.capacity()) {
        chunk.clear().put(bytes).flip().limit((int) Math.min(chunk.capacity(), size - at));
        upload.write(chunk);
      }
      return upload.commit();
    }
  }

  private static final com.sun.management.OperatingSystemMXBean OS =
      (com.sun.management.OperatingSystemMXBean)
          java.lang.management.ManagementFactory.getOperatingSystemMXBean();
  private static long cpuBefore = OS.getProcessCpuTime();

  private static void report(String what, long size, long nanos) {
    long cpu = OS.getProcessCpuTime();
    System.out.printf("  %-28s %6.2f GB/s  %5.2f CPU s/GiB%n", what, size / (nanos / 1e9) / 1e9,
        (cpu - cpuBefore) / 1e9 / (size / (double) (1L << 30)));
    cpuBefore = cpu;
  }

  /** Sender: a direct buffer written over and over; receiver: one reused direct buffer. */
  private static long rawTcp(long size) throws Exception {
    try (ServerSocketChannel server = ServerSocketChannel.open()) {
      server.bind(new InetSocketAddress("127.0.0.1", 0));
      Thread sender = new Thread(() -> {
        try (SocketChannel out = SocketChannel.open(server.getLocalAddress())) {
          ByteBuffer buffer = ByteBuffer.allocateDirect(8 << 20);
          for (long left = size; left > 0; ) {
            buffer.clear().limit((int) Math.min(buffer.capacity(), left));
            left -= out.write(buffer);
          }
          out.read(ByteBuffer.allocate(1));
        } catch (IOException e) {
          throw new java.io.UncheckedIOException(e);
        }
      });
      long start = System.nanoTime();
      sender.start();
      try (SocketChannel in = server.accept()) {
        ByteBuffer buffer = ByteBuffer.allocateDirect(8 << 20);
        for (long got = 0; got < size; ) {
          buffer.clear();
          got += in.read(buffer);
        }
        in.write(ByteBuffer.wrap(new byte[1]));
      }
      sender.join();
      return System.nanoTime() - start;
    }
  }

  private static long tlsStream(long size, PortIdentity identity, PinnedTrust pins)
      throws Exception {
    SSLContext server = JdkContexts.serving(identity);
    try (SSLServerSocket listener = (SSLServerSocket) server.getServerSocketFactory()
        .createServerSocket(0, 4, java.net.InetAddress.getLoopbackAddress())) {
      Thread sender = new Thread(() -> {
        try (Socket out = listener.accept()) {
          OutputStream stream = out.getOutputStream();
          byte[] buffer = new byte[1 << 20];
          for (long left = size; left > 0; left -= buffer.length) {
            stream.write(buffer, 0, (int) Math.min(buffer.length, left));
          }
          stream.flush();
          out.getInputStream().read();
        } catch (IOException e) {
          throw new java.io.UncheckedIOException(e);
        }
      });
      sender.start();
      long start = System.nanoTime();
      try (SSLSocket in = (SSLSocket) JdkContexts.trusting(identity).getSocketFactory()
          .createSocket("127.0.0.1", listener.getLocalPort())) {
        InputStream stream = in.getInputStream();
        byte[] buffer = new byte[1 << 20];
        for (long got = 0; got < size; ) {
          int n = stream.read(buffer);
          if (n < 0) {
            throw new IOException("short");
          }
          got += n;
        }
        in.getOutputStream().write(1);
        in.getOutputStream().flush();
      }
      sender.join();
      return System.nanoTime() - start;
    }
  }
}
