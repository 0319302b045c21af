package dev.bulletin.runtime;

import dev.bulletin.protocol.BulletinVersion;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.bulletin.bridge.ObjectKey;
import dev.bulletin.bridge.ObjectStore;
import dev.bulletin.bridge.ObjectStores;
import dev.bulletin.bridge.StoreOptions;
import dev.bulletin.runtime.journal.JournalOptions;
import dev.bulletin.runtime.journal.JournalState;
import dev.bulletin.runtime.journal.Journals;
import dev.bulletin.runtime.journal.StateJournal;
import dev.bulletin.runtime.journal.impl.FrameSink;
import dev.bulletin.runtime.identity.ClusterId;
import dev.bulletin.runtime.impl.RuntimeVerticle;
import dev.bulletin.worker.WorkerAgent;
import dev.bulletin.worker.Workers;
import dev.bulletin.worker.tls.TlsOptions;
import io.vertx.core.Vertx;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A running bulletin runtime with its embedded worker agent: the object store, the warm
 * executors and the gRPC API. {@link #start} returns once the API serves; the executors warm up
 * in the background (calls queue until they are ready).
 */
public final class BulletinRuntime implements AutoCloseable {


  private static final String STATE_FILE = "runtime.json";

  private final RuntimeOptions options;
  private final TlsOptions tls;
  private final Vertx vertx;
  private final ObjectStore store;
  private final WorkerAgent agent;
  private final String clusterId;
  private final AtomicBoolean closed = new AtomicBoolean();
  private final Runnable onShutdownRequest;
  /** The journal and what it restored (docs/durability.md); a disabled one keeps nothing. */
  private final Journals.Opened journal;
  private int port;
  private int dataPort;
  private int httpPort;
  private String dashboardUrl = "";
  private CompletableFuture<Void> executorsWarm;

  private BulletinRuntime(RuntimeOptions options, TlsOptions tls, Runnable onShutdownRequest,
      FrameSink.Opener journalSinks) {
    this.options = options;
    this.tls = tls;
    this.onShutdownRequest = onShutdownRequest;
    // Kept across restarts: pool providers find their workers again by it.
    this.clusterId = ClusterId.loadOrCreate(options.home());
    // First: a journal this version cannot read stops the start before anything is touched.
    long opening = System.nanoTime();
    this.journal = options.journal() ? Journals.open(
        JournalOptions.in(options.journalFolder()).withSinks(journalSinks))
        : new Journals.Opened(StateJournal.disabled(), new JournalState(), 0, 0);
    if (journal.records() > 0) {
      java.util.logging.Logger.getLogger(BulletinRuntime.class.getName()).info("journal: read "
          + journal.records() + " records from " + options.journalFolder() + " in "
          + (System.nanoTime() - opening) / 1_000_000 + " ms");
    }
    this.vertx = dev.bulletin.worker.EventLoops.create();
    Path storeFolder = options.storeFolder() != null ? options.storeFolder()
        : ObjectStores.defaultFolder(clusterId);
    Path spillFolder = options.spillFolder() != null ? options.spillFolder()
        : ObjectStores.defaultSpillFolder(clusterId);
    StoreOptions storeOptions = withUserShares(StoreOptions.withDefaults(storeFolder,
        options.storeCapacityBytes(), spillFolder), options);
    // With a journal the store outlives a crash: the restore keeps what the journal names.
    long reopening = System.nanoTime();
    this.store = options.journal() ? ObjectStores.reopen(storeOptions)
        : ObjectStores.open(storeOptions);
    if (options.journal() && store.objectCount() > 0) {
      java.util.logging.Logger.getLogger(BulletinRuntime.class.getName()).info("store: found "
          + store.objectCount() + " objects an earlier run left in " + storeFolder + " in "
          + (System.nanoTime() - reopening) / 1_000_000 + " ms");
    }
    giveNamespacesToTheirAccounts(store, options);
    ObjectStores.keepArena(store, options.storeArenaShare()); // filled in the background
    this.agent = Workers.local(options.worker(), store);
  }

  /**
   * Where users run as accounts of their own, each namespace is held to its share of the store
   * by a file system of its own (docs/security.md, "Store space"): a user's files, however
   * written, then fill only that user's share. Only root may mount it; run_as needs root too.
   */
  private static StoreOptions withUserShares(StoreOptions store, RuntimeOptions options) {
    if (options.config().runAsAccounts().isEmpty()
        || !dev.bulletin.runtime.config.UnixAccounts.processIsRoot()) {
      return store;
    }
    return store.withUserShare(options.storeUserShareBytes() > 0
        ? Math.min(options.storeUserShareBytes(), store.capacityBytes()) : store.capacityBytes());
  }

  /**
   * Gives each run_as user's namespace to their account before any client connects: a client on
   * this host then sees at once whose staging folder it is (and writes there only if it is its
   * own), and nothing lands in the folder before its owner is settled.
   */
  private static void giveNamespacesToTheirAccounts(ObjectStore store, RuntimeOptions options) {
    if (!dev.bulletin.runtime.config.UnixAccounts.processIsRoot()) {
      return; // run_as needs root; the config check says so
    }
    options.config().runAsAccounts().forEach((user, account) ->
        dev.bulletin.runtime.config.UnixAccounts.lookup(account).ifPresent(found ->
            store.giveFolderTo(ObjectKey.namespaceOf(user), found.uid(), found.gid())));
  }

  /**
   * Starts everything and blocks until the API serves.
   *
   * @param onShutdownRequest runs (on another thread) when the owner asks the runtime to stop
   */
  public static BulletinRuntime start(RuntimeOptions options, Runnable onShutdownRequest)
      throws Exception {
    return start(options, TlsOptions.plain(), onShutdownRequest);
  }

  /**
   * Starts everything with TLS on both ports as {@code tls} says, and blocks until the API
   * serves.
   */
  public static BulletinRuntime start(RuntimeOptions options, TlsOptions tls,
      Runnable onShutdownRequest) throws Exception {
    return start(options, tls, onShutdownRequest, FrameSink.FILES);
  }

  /**
   * Starts everything with the journal's log files opened by {@code journalSinks}: tests use
   * it for a disk that syncs late or fills up.
   */
  public static BulletinRuntime start(RuntimeOptions options, TlsOptions tls,
      Runnable onShutdownRequest, FrameSink.Opener journalSinks) throws Exception {
    BulletinRuntime runtime = new BulletinRuntime(options, tls, onShutdownRequest,
        journalSinks);
    try {
      runtime.boot();
      return runtime;
    } catch (Exception e) {
      runtime.close();
      throw e;
    }
  }

  private void boot() throws Exception {
    Files.deleteIfExists(options.home().resolve(STATE_FILE));
    // The embedded worker's executors start in the background (RuntimeVerticle attaches it):
    // the API serves at once, and calls queue until they are warm.
    RuntimeVerticle verticle = new RuntimeVerticle(options, tls, agent, journal, clusterId,
        BulletinVersion.get(), () -> new Thread(onShutdownRequest, "bulletin-shutdown").start());
    try {
      vertx.deployVerticle(verticle).toCompletionStage().toCompletableFuture()
          .get(30, TimeUnit.SECONDS);
    } catch (ExecutionException e) {
      // Why it did not start (a port in use), not the future's wrapper.
      throw e.getCause() instanceof Exception cause ? cause : e;
    }
    port = verticle.actualPort();
    dataPort = verticle.dataPort();
    httpPort = verticle.httpPort();
    dashboardUrl = verticle.dashboardUrl();
    executorsWarm = verticle.embeddedWorkerOpened();
    writeStateFile();
  }

  /** Where clients on this machine reach the runtime (loopback when it listens everywhere). */
  public String address() {
    String host = options.host().equals("0.0.0.0") || options.host().equals("::")
        ? "127.0.0.1" : options.host();
    return host + ":" + port;
  }

  /** The bulk data port (raw TCP, same host as {@link #address}). */
  public int dataPort() {
    return dataPort;
  }

  /** The HTTP port of /metrics and the dashboard; 0 when it serves none (--http-port off). */
  public int httpPort() {
    return httpPort;
  }

  /** The dashboard's address ("http://127.0.0.1:8780/"), empty when there is no HTTP port. */
  public String dashboardUrl() {
    return dashboardUrl;
  }

  /**
   * Completes once the embedded worker's executors are warm and it takes calls ({@link #start}
   * returns before: calls queue until then).
   */
  public CompletableFuture<Void> executorsWarm() {
    return executorsWarm;
  }

  public String clusterId() {
    return clusterId;
  }

  public ObjectStore store() {
    return store;
  }

  private void writeStateFile() throws IOException {
    Map<String, Object> state = new LinkedHashMap<>();
    state.put("address", address());
    state.put("data_port", dataPort);
    // The dashboard and /metrics (docs/observability.md); 0 and "" with --http-port off.
    state.put("http_port", httpPort);
    state.put("dashboard_url", dashboardUrl);
    state.put("pid", ProcessHandle.current().pid());
    state.put("cluster_id", clusterId);
    state.put("store_dir", store.root().toString());
    state.put("spill_dir", String.valueOf(store.spillRoot()));
    state.put("store_capacity_bytes", store.capacityBytes());
    state.put("version", BulletinVersion.get());
    state.put("journal", journal.journal().enabled()
        ? journal.journal().folder().toString() : null);
    // Clients on this host dial TLS with this CA (null: the system's trusted CAs).
    state.put("tls", tls.enabled());
    state.put("ca", tls.ca() == null ? null : tls.ca().toAbsolutePath().toString());
    Path home = options.home();
    Files.createDirectories(home);
    Path temp = home.resolve(STATE_FILE + ".tmp");
    new ObjectMapper().writerWithDefaultPrettyPrinter().writeValue(temp.toFile(), state);
    Files.move(temp, home.resolve(STATE_FILE), StandardCopyOption.ATOMIC_MOVE,
        StandardCopyOption.REPLACE_EXISTING);
  }

  /** Stops serving, stops every executor and removes the object store and the state file. */
  @Override
  public void close() {
    if (!closed.compareAndSet(false, true)) {
      return;
    }
    try {
      vertx.close().toCompletionStage().toCompletableFuture().get(10, TimeUnit.SECONDS);
    } catch (Exception ignored) {
      // Closing anyway.
    }
    agent.close();
    journal.journal().close();
    store.close();
    try {
      Files.deleteIfExists(options.home().resolve(STATE_FILE));
    } catch (IOException ignored) {
      // A stale file is replaced at the next start.
    }
  }
}
