package dev.bulletin.runtime.harness;

import dev.bulletin.runtime.BulletinRuntime;
import dev.bulletin.runtime.RuntimeOptions;
import dev.bulletin.runtime.config.RuntimeConfig;
import dev.bulletin.runtime.journal.impl.FrameSink;
import dev.bulletin.worker.tls.TlsOptions;
import dev.bulletin.worker.GpuInventory;
import dev.bulletin.worker.WorkerOptions;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;

/**
 * The real runtime in this JVM, driven through its public gRPC API as a client would, the way
 * Vert.x's own tests drive a server: the control plane, the gRPC services, the object API and
 * the embedded worker with real Python executors, listening on loopback on free ports. GPUs are
 * simulated (the one fake: this machine has none), as {@code bulletin up --simulate-gpus} does.
 *
 * <pre>
 * try (RuntimeHarness runtime = RuntimeHarness.start(home, 1, RuntimeConfig.empty());
 *      HarnessClient client = runtime.connect();
 *      HarnessSession session = client.openSession()) {
 *   session.submit(call.spec("t1"));
 *   TaskEvent end = session.awaitEnd("t1");
 * }
 * </pre>
 */
public final class RuntimeHarness implements AutoCloseable {

  /**
   * How long a test waits for something the runtime must do before it fails: a guard against a
   * hang on a busy machine, never a timing assertion.
   */
  public static final Duration PATIENCE = Duration.ofSeconds(120);
  /** The owner's token: the user who started the cluster. */
  public static final String OWNER_TOKEN = "harness-owner-token-0123456789";
  public static final String OWNER = "ada";

  private final BulletinRuntime runtime;

  private RuntimeHarness(BulletinRuntime runtime) {
    this.runtime = runtime;
  }

  /**
   * Starts a runtime whose embedded worker has {@code simulatedGpus} GPUs (one warm executor
   * each), 2 CPUs and no warm CPU executor; returns once its executors are warm and it serves.
   *
   * @param home a fresh folder: state file, cluster id, object store and spill folder go there
   */
  public static RuntimeHarness start(Path home, int simulatedGpus, RuntimeConfig config)
      throws Exception {
    WorkerOptions worker = new WorkerOptions("harness", PythonCalls.python(),
        GpuInventory.simulated(simulatedGpus), 2, 4L << 30, 0, 60_000, 0,
        WorkerOptions.DEFAULT_EXECUTOR_IDLE_MILLIS, Map.of());
    return start(RuntimeOptions.builder(home, worker).owner(OWNER_TOKEN, OWNER).config(config)
        .storeFolder(home.resolve("store")).spillFolder(home.resolve("spill")).build());
  }

  /** Starts a runtime with these options (loopback and free ports unless they say otherwise). */
  public static RuntimeHarness start(RuntimeOptions options) throws Exception {
    return start(options, FrameSink.FILES);
  }

  /** As {@link #start(RuntimeOptions)}, its journal's log files opened by {@code sinks}. */
  public static RuntimeHarness start(RuntimeOptions options, FrameSink.Opener sinks)
      throws Exception {
    BulletinRuntime runtime = BulletinRuntime.start(options, TlsOptions.plain(), () -> { },
        sinks);
    try {
      // Tests count executors and expect calls to start at once: wait for the warm ones.
      runtime.executorsWarm().get(90, java.util.concurrent.TimeUnit.SECONDS);
    } catch (Exception e) {
      runtime.close();
      throw e;
    }
    return new RuntimeHarness(runtime);
  }

  /** Reads a config file's text as `bulletin up --config` does (written to {@code home}). */
  public static RuntimeConfig config(Path home, String yaml) throws Exception {
    Files.createDirectories(home);
    Path file = home.resolve("cluster.yaml");
    Files.writeString(file, yaml);
    return RuntimeConfig.load(file);
  }

  /** "127.0.0.1:PORT": where the gRPC API listens. */
  public String address() {
    return runtime.address();
  }

  /** A client with the owner's token. */
  public HarnessClient connect() {
    return connect(OWNER_TOKEN);
  }

  public HarnessClient connect(String token) {
    String address = address();
    int colon = address.lastIndexOf(':');
    return new HarnessClient(address.substring(0, colon),
        Integer.parseInt(address.substring(colon + 1)), token);
  }

  @Override
  public void close() {
    runtime.close();
  }
}
