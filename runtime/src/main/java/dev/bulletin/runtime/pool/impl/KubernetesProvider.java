package dev.bulletin.runtime.pool.impl;

import dev.bulletin.runtime.pool.PoolConfig;
import dev.bulletin.runtime.pool.ProvidedWorker;
import dev.bulletin.runtime.pool.ProviderContext;
import dev.bulletin.runtime.pool.ProviderException;
import dev.bulletin.runtime.pool.ProviderKind;
import dev.bulletin.runtime.pool.WorkerHandle;
import dev.bulletin.runtime.pool.WorkerProvider;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.Secret;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientBuilder;
import io.fabric8.kubernetes.client.KubernetesClientException;
import io.fabric8.kubernetes.client.informers.ResourceEventHandler;
import io.fabric8.kubernetes.client.informers.SharedIndexInformer;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * Workers as Kubernetes Pods, one worker per Pod, through the API only: create, watch (an
 * informer per namespace: one list, then a watch, so {@link #list} reads a cache and costs the
 * API server nothing), delete. Pods carry this cluster's labels; that is how a restarted runtime
 * finds them. Each Pod's join credentials are in a Secret of its own, owned by the Pod (see
 * {@link WorkerPods}). Pods that fail or are evicted are noticed from the watch and deleted (a
 * failed one once the last lines of its log are read, {@link PodLogs}, for the reason); Pods
 * that stay unscheduled past the pool's pending timeout are deleted with the scheduler's reason,
 * which the autoscaler reports as a failed launch and backs off on.
 */
public final class KubernetesProvider implements WorkerProvider {

  private static final Logger LOG = Logger.getLogger("dev.bulletin.runtime.pool");
  private static final Duration SYNC_TIMEOUT = Duration.ofSeconds(30);
  private static final Duration SWEEP = Duration.ofSeconds(1);

  private final ProviderContext context;
  private final KubernetesClient client;
  private final boolean ownsClient;
  private final Set<String> namespaces;
  private final Map<String, SharedIndexInformer<Pod>> informers = new ConcurrentHashMap<>();
  private final Map<String, CompletableFuture<Void>> synced = new ConcurrentHashMap<>();
  /** Why a worker's Pod went away, for the autoscaler's report; by worker id. */
  private final Map<String, String> goneReasons = new ConcurrentHashMap<>();
  /** Pods this provider is deleting (a failed one is seen again until the delete lands). */
  private final Set<String> deleting = ConcurrentHashMap.newKeySet();
  /** Failed Pods whose log is being read: still listed, so their reason is ready when they go. */
  private final Set<String> readingLog = ConcurrentHashMap.newKeySet();
  /**
   * Held while an ended Pod is marked as being deleted and as having its log read, and while a
   * listing decides on it: between the two marks the listing would drop the worker with no reason
   * (the informer's thread and the listing's both see a Pod end).
   */
  private final Object ends = new Object();
  private final PendingPods pending;
  private final ExecutorService threads = Executors.newCachedThreadPool(r -> {
    Thread thread = new Thread(r, "bulletin-kubernetes");
    thread.setDaemon(true);
    return thread;
  });
  private final ScheduledExecutorService sweeper = Executors.newSingleThreadScheduledExecutor(r -> {
    Thread thread = new Thread(r, "bulletin-kubernetes-sweep");
    thread.setDaemon(true);
    return thread;
  });

  /**
   * A provider on {@code client}.
   *
   * @param namespaces where the pools' Pods live: watched from the start, so adoption sees them
   *     ("" = the client's namespace)
   * @param ownsClient close the client with the provider
   */
  public KubernetesProvider(ProviderContext context, Set<String> namespaces,
      KubernetesClient client, boolean ownsClient) {
    this.context = context;
    this.client = client;
    this.ownsClient = ownsClient;
    this.namespaces = ConcurrentHashMap.newKeySet();
    namespaces.forEach(ns -> this.namespaces.add(ns.isEmpty() ? defaultNamespace() : ns));
    this.pending = new PendingPods(client);
    sweeper.scheduleWithFixedDelay(this::sweep, SWEEP.toMillis(), SWEEP.toMillis(),
        TimeUnit.MILLISECONDS);
  }

  /**
   * A provider whose client configures itself as kubectl does: $KUBECONFIG or ~/.kube/config,
   * else the service account of the Pod the runtime runs in.
   */
  public static KubernetesProvider connect(ProviderContext context, Set<String> namespaces) {
    return new KubernetesProvider(context, namespaces, new KubernetesClientBuilder().build(), true);
  }

  @Override
  public ProviderKind kind() {
    return ProviderKind.KUBERNETES;
  }

  /** The namespace of a pool's Pods: its own, else the client's (kubeconfig, in-cluster). */
  public String namespaceOf(PoolConfig pool) {
    return pool.kubernetes().namespace().orElseGet(this::defaultNamespace);
  }

  private String defaultNamespace() {
    String ns = client.getNamespace();
    return ns == null || ns.isBlank() ? "default" : ns;
  }

  @Override
  public CompletableFuture<WorkerHandle> launch(PoolConfig pool, String workerId) {
    return CompletableFuture.supplyAsync(() -> create(pool, workerId), threads);
  }

  private WorkerHandle create(PoolConfig pool, String workerId) {
    String ns = namespaceOf(pool);
    awaitWatch(ns);
    Pod pod = WorkerPods.pod(context, pool, workerId, ns);
    String name = pod.getMetadata().getName();
    Pod created;
    try {
      created = client.pods().inNamespace(ns).resource(pod).create();
    } catch (KubernetesClientException e) {
      throw KubeErrors.of("create the Pod of worker " + workerId, ns, e);
    }
    try {
      // After the Pod, so that it owns its Secret: deleting the Pod (by anyone) removes both.
      Secret secret = WorkerPods.ownedBy(WorkerPods.secret(context, pool, workerId, ns), created);
      client.secrets().inNamespace(ns).resource(secret).create();
    } catch (RuntimeException e) {
      deleteQuietly(ns, name, Duration.ZERO);
      throw KubeErrors.of("create the Secret of worker " + workerId, ns, e);
    }
    return new WorkerHandle(ProviderKind.KUBERNETES, pool.name(), workerId, ns + "/" + name);
  }

  @Override
  public CompletableFuture<Void> terminate(WorkerHandle handle) {
    return CompletableFuture.runAsync(() -> {
      String[] at = split(handle);
      try {
        // The Pod's own terminationGracePeriodSeconds (the pool's terminate_grace) applies.
        client.pods().inNamespace(at[0]).withName(at[1]).delete();
        client.secrets().inNamespace(at[0]).withName(at[1]).delete();
      } catch (KubernetesClientException e) {
        throw KubeErrors.of("delete the Pod of worker " + handle.workerId(), at[0], e);
      }
    }, threads);
  }

  private static String[] split(WorkerHandle handle) {
    String id = handle.providerId();
    int slash = id.indexOf('/');
    if (slash <= 0) {
      throw new ProviderException("worker " + handle.workerId() + " has no namespace/name Pod"
          + " handle: " + id);
    }
    return new String[] {id.substring(0, slash), id.substring(slash + 1)};
  }

  @Override
  public CompletableFuture<List<ProvidedWorker>> list() {
    return CompletableFuture.supplyAsync(() -> {
      List<ProvidedWorker> out = new ArrayList<>();
      for (String ns : new LinkedHashSet<>(namespaces.isEmpty() ? Set.of(defaultNamespace()) : namespaces)) {
        awaitWatch(ns);
        for (Pod pod : informers.get(ns).getStore().list()) {
          provided(pod).ifPresent(out::add);
        }
      }
      return out;
    }, threads);
  }

  /** A live worker Pod as the autoscaler sees it; empty for ended or ending ones. */
  private Optional<ProvidedWorker> provided(Pod pod) {
    Map<String, String> labels = pod.getMetadata().getLabels();
    String phase = pod.getStatus() == null ? null : pod.getStatus().getPhase();
    if (labels == null || !context.clusterId().equals(labels.get(WorkerPods.CLUSTER))
        || labels.get(WorkerPods.POOL) == null || labels.get(WorkerPods.WORKER) == null) {
      return Optional.empty();
    }
    boolean ended = "Failed".equals(phase) || "Succeeded".equals(phase);
    synchronized (ends) {
      if (ended) {
        // The informer's cache can show the end before its handler ran: the reason (and a failed
        // Pod's log) is taken now, once, or the worker would be gone with no word of why.
        seen(pod);
      }
      if ((ended || pod.getMetadata().getDeletionTimestamp() != null)
          && !readingLog.contains(key(pod))) {
        return Optional.empty();
      }
    }
    WorkerHandle handle = new WorkerHandle(ProviderKind.KUBERNETES, labels.get(WorkerPods.POOL),
        labels.get(WorkerPods.WORKER), pod.getMetadata().getNamespace() + "/"
        + pod.getMetadata().getName());
    Optional<Instant> expires = Optional.empty();
    if (pod.getSpec().getActiveDeadlineSeconds() != null && pod.getStatus() != null
        && pod.getStatus().getStartTime() != null) {
      expires = Optional.of(Instant.parse(pod.getStatus().getStartTime())
          .plusSeconds(pod.getSpec().getActiveDeadlineSeconds()));
    }
    return Optional.of(new ProvidedWorker(handle, "Running".equals(phase), expires));
  }

  @Override
  public Optional<String> whyGone(WorkerHandle handle) {
    return Optional.ofNullable(goneReasons.remove(handle.workerId()));
  }

  /** Starts the namespace's informer once and waits for its first list. */
  private void awaitWatch(String ns) {
    namespaces.add(ns);
    CompletableFuture<Void> ready = synced.computeIfAbsent(ns, this::startWatch);
    try {
      ready.get(SYNC_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
    } catch (java.util.concurrent.TimeoutException e) {
      throw new ProviderException("the watch of Pods in namespace " + ns + " did not sync within "
          + SYNC_TIMEOUT.toSeconds() + "s; is the API server reachable?");
    } catch (java.util.concurrent.ExecutionException e) {
      synced.remove(ns, ready); // try again at the next call: a Role may be fixed meanwhile
      throw KubeErrors.of("list and watch Pods", ns, e.getCause());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new ProviderException("interrupted while waiting for the watch of Pods in " + ns);
    }
  }

  private CompletableFuture<Void> startWatch(String ns) {
    SharedIndexInformer<Pod> informer = client.pods().inNamespace(ns)
        .withLabel(WorkerPods.CLUSTER, context.clusterId()).runnableInformer(0);
    // A refusal (403, 404 namespace) fails the start instead of being retried for ever.
    informer.exceptionHandler((started, error) -> started);
    informer.addEventHandler(new ResourceEventHandler<>() {
      @Override
      public void onAdd(Pod pod) {
        seen(pod);
      }

      @Override
      public void onUpdate(Pod before, Pod pod) {
        seen(pod);
      }

      @Override
      public void onDelete(Pod pod, boolean unknownFinalState) {
        deleting.remove(key(pod));
      }
    });
    SharedIndexInformer<Pod> previous = informers.put(ns, informer);
    if (previous != null) {
      previous.stop();
    }
    return informer.start().toCompletableFuture();
  }

  /**
   * The watch's view of a Pod: one that ended is the end of its worker. A failed one (not an
   * eviction: its output says nothing of the node's pressure) has the last lines of its log read
   * first, on this provider's threads and never the informer's; until then it stays listed, so
   * that the autoscaler finds the full reason once it sees the worker gone.
   */
  private void seen(Pod pod) {
    String phase = pod.getStatus() == null ? null : pod.getStatus().getPhase();
    if (!"Failed".equals(phase) && !"Succeeded".equals(phase)) {
      return;
    }
    String ns = pod.getMetadata().getNamespace();
    String name = pod.getMetadata().getName();
    String worker = pod.getMetadata().getLabels().get(WorkerPods.WORKER);
    String reason = "Pod " + ns + "/" + name + " " + phase.toLowerCase() + ended(pod)
        + Optional.ofNullable(pod.getStatus().getMessage()).map(m -> " (" + m + ")").orElse("");
    // Not an eviction, nor a Pod being deleted on purpose (its end is no news).
    boolean readLog = "Failed".equals(phase) && !"Evicted".equals(pod.getStatus().getReason())
        && pod.getMetadata().getDeletionTimestamp() == null;
    synchronized (ends) {
      if (!deleting.add(key(pod))) {
        return;
      }
      if (readLog) {
        readingLog.add(key(pod));
      } else if (worker != null) {
        goneReasons.put(worker, reason);
      }
    }
    threads.execute(() -> {
      String full = reason;
      try {
        if (readLog) {
          full = reason + "; " + PodLogs.lastOutput(client, ns, name, threads);
        }
      } finally {
        if (readLog) {
          if (worker != null) {
            goneReasons.put(worker, full); // before it leaves the listing
          }
          readingLog.remove(key(pod));
        }
        String said = full;
        LOG.log(Level.WARNING, () -> said + "; deleting it");
        deleteQuietly(ns, name, Duration.ZERO);
      }
    });
  }

  /** ": reason" of the Pod, else of its worker container's end (a kubelet's "Error", exit code). */
  private static String ended(Pod pod) {
    if (pod.getStatus().getReason() != null) {
      return ": " + pod.getStatus().getReason();
    }
    if (pod.getStatus().getContainerStatuses() == null) {
      return "";
    }
    return pod.getStatus().getContainerStatuses().stream()
        .filter(c -> WorkerPods.CONTAINER.equals(c.getName()) && c.getState() != null
            && c.getState().getTerminated() != null)
        .map(c -> c.getState().getTerminated())
        .map(t -> ": " + Optional.ofNullable(t.getReason()).orElse("exited")
            + (t.getExitCode() == null ? "" : " (exit code " + t.getExitCode() + ")"))
        .findFirst().orElse("");
  }

  /** Deletes the Pods that stayed unscheduled past their pool's pending timeout. */
  private void sweep() {
    try {
      Instant now = Instant.now();
      for (SharedIndexInformer<Pod> informer : informers.values()) {
        for (Pod pod : informer.getStore().list()) {
          if (deleting.contains(key(pod)) || !PendingPods.overdue(pod, now)) {
            continue;
          }
          String reason = pending.reason(pod, now);
          String worker = pod.getMetadata().getLabels().get(WorkerPods.WORKER);
          if (worker != null) {
            goneReasons.put(worker, reason);
          }
          deleting.add(key(pod));
          LOG.warning(reason + "; deleting it");
          deleteQuietly(pod.getMetadata().getNamespace(), pod.getMetadata().getName(), Duration.ZERO);
        }
      }
    } catch (RuntimeException e) {
      LOG.log(Level.WARNING, "the sweep of pending Pods failed", e);
    }
  }

  /** Why the pool's Pods wait for a node now, if any does (for the pool's status). */
  @Override
  public Optional<String> waiting(String pool) {
    Instant now = Instant.now();
    for (SharedIndexInformer<Pod> informer : informers.values()) {
      for (Pod pod : informer.getStore().list()) {
        if (pool.equals(pod.getMetadata().getLabels().get(WorkerPods.POOL))
            && PendingPods.unscheduled(pod)) {
          Optional<String> why = PendingPods.condition(pod);
          if (why.isPresent()) {
            return Optional.of("Pod " + pod.getMetadata().getName() + " waits for a node: "
                + why.get());
          }
        }
      }
    }
    return Optional.empty();
  }

  private void deleteQuietly(String ns, String name, Duration grace) {
    try {
      client.pods().inNamespace(ns).withName(name).withGracePeriod(grace.toSeconds()).delete();
      client.secrets().inNamespace(ns).withName(name).delete();
    } catch (KubernetesClientException e) {
      LOG.warning(KubeErrors.of("delete Pod " + ns + "/" + name, ns, e).getMessage());
    } catch (IllegalStateException e) {
      // The provider closed meanwhile; the next runtime's listing finds the ended Pod again.
      LOG.fine(() -> "Pod " + ns + "/" + name + " not deleted: " + e.getMessage());
    }
  }

  private static String key(Pod pod) {
    return pod.getMetadata().getNamespace() + "/" + pod.getMetadata().getName();
  }

  @Override
  public void close() {
    sweeper.shutdownNow();
    informers.values().forEach(SharedIndexInformer::stop);
    threads.shutdownNow();
    if (ownsClient) {
      client.close();
    }
  }
}
