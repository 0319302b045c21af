package dev.bulletin.runtime.pool.impl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.runtime.pool.KubernetesOptions;
import dev.bulletin.runtime.pool.PoolConfig;
import dev.bulletin.runtime.pool.PoolsConfig;
import dev.bulletin.runtime.pool.ProviderContext;
import dev.bulletin.runtime.pool.ProviderException;
import dev.bulletin.runtime.pool.WorkerCommand;
import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.Quantity;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The worker Pod built from a pool with a pod_template: what the template keeps and what bulletin sets. */
class WorkerPodsTest {

  static final ProviderContext CONTEXT = new ProviderContext("c1", "head:8770", "worker-token-x",
      "/usr/bin/python3", Path.of("/tmp/unused"), WorkerCommand.bulletin());

  static PoolConfig pool(String kubernetesBlock) {
    return PoolsConfig.parseYaml("""
        pools:
          - name: gpu
            provider: kubernetes
            worker: {gpus: 1, cpus: 2}
            max_workers: 1
            python: /opt/venv/bin/python
            kubernetes:
        """ + kubernetesBlock.indent(6)).pools().get(0);
  }

  @Test
  void theTemplateKeepsItsExtrasAndBulletinSetsTheWorkerContainer() {
    PoolConfig pool = pool("""
        image: lab/worker:2
        pod_template:
          metadata: {labels: {team: vision, bulletin.dev/cluster: forged}}
          spec:
            priorityClassName: batch
            volumes: [{name: data, persistentVolumeClaim: {claimName: datasets}}]
            containers:
              - name: sidecar
                image: busybox
              - name: worker
                image: lab/old:1
                env: [{name: HF_HOME, value: /data/hf}, {name: BULLETIN_WORKER_TOKEN, value: leaked}]
                volumeMounts: [{name: data, mountPath: /data}]
                resources: {requests: {ephemeral-storage: 5Gi}}
        """);
    Pod pod = WorkerPods.pod(CONTEXT, pool, "gpu-w1", "ns1");
    assertEquals("vision", pod.getMetadata().getLabels().get("team"));
    assertEquals("c1", pod.getMetadata().getLabels().get("bulletin.dev/cluster"),
        "the cluster label is bulletin's, whatever the template says");
    assertEquals("batch", pod.getSpec().getPriorityClassName());
    assertEquals("datasets", pod.getSpec().getVolumes().get(0).getPersistentVolumeClaim().getClaimName());
    assertEquals(List.of("sidecar", "worker"), pod.getSpec().getContainers().stream()
        .map(Container::getName).toList());
    Container worker = pod.getSpec().getContainers().get(1);
    assertEquals("lab/worker:2", worker.getImage(), "kubernetes.image wins over the template's");
    assertEquals(List.of("/opt/venv/bin/python"), worker.getCommand());
    assertEquals("/data", worker.getVolumeMounts().get(0).getMountPath());
    assertEquals(new Quantity("5Gi"), worker.getResources().getRequests().get("ephemeral-storage"));
    assertEquals(new Quantity("1"), worker.getResources().getLimits().get("nvidia.com/gpu"));
    assertEquals(List.of("HF_HOME", "BULLETIN_HEAD", "BULLETIN_WORKER_TOKEN", "BULLETIN_JOIN_TOKEN",
        "BULLETIN_CA_PEM"), worker.getEnv().stream().map(e -> e.getName()).toList());
    assertFalse(worker.getEnv().stream().anyMatch(e -> "leaked".equals(e.getValue())),
        "a template's value for a secret variable is replaced by the Secret's");
    assertEquals("Never", pod.getSpec().getRestartPolicy());
  }

  @Test
  void aTemplateWithoutAnImageNeedsKubernetesImage() {
    PoolConfig pool = pool("""
        pod_template: {spec: {containers: [{name: worker}]}}
        """);
    ProviderException e = assertThrows(ProviderException.class,
        () -> WorkerPods.pod(CONTEXT, pool, "gpu-w1", "ns1"));
    assertTrue(e.getMessage().contains("kubernetes.pod_template has no image for its worker"
        + " container; set kubernetes.image"), e.getMessage());
  }

  @Test
  void namesAreDnsLabelsAndSimulatedGpusRequestNone() {
    assertEquals("bulletin-c1-gpu-a-1f2e", WorkerPods.name("c1", "GPU_A-1f2e"));
    PoolConfig pool = pool("""
        image: lab/worker:2
        simulate_gpus: true
        """);
    Container worker = WorkerPods.pod(CONTEXT, pool, "gpu-w1", "ns1").getSpec().getContainers().get(0);
    assertFalse(worker.getResources().getLimits().containsKey("nvidia.com/gpu"));
    assertTrue(worker.getArgs().containsAll(List.of("--simulate-gpus", "1")), worker.getArgs().toString());
    assertEquals(Map.of("cpu", new Quantity("2")), worker.getResources().getRequests());
  }

  @Test
  void onATlsRuntimeTheSecretCarriesTheClusterCaAndThePodReadsItFromThere() {
    PoolConfig pool = pool("image: lab/worker:2\n");
    String pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    ProviderContext tls = CONTEXT.withCa(pem);
    assertEquals(pem, WorkerPods.secret(tls, pool, "gpu-w1", "ns1").getStringData()
        .get(WorkerPods.CA_PEM));
    assertFalse(WorkerPods.secret(CONTEXT, pool, "gpu-w1", "ns1").getStringData()
        .containsKey(WorkerPods.CA_PEM), "a plaintext runtime has no CA to give");
    Container worker = WorkerPods.pod(tls, pool, "gpu-w1", "ns1").getSpec().getContainers().get(0);
    var ca = worker.getEnv().stream().filter(e -> e.getName().equals(WorkerPods.CA_PEM))
        .findFirst().orElseThrow().getValueFrom().getSecretKeyRef();
    assertEquals(List.of(WorkerPods.name("c1", "gpu-w1"), WorkerPods.CA_PEM, true),
        List.of(ca.getName(), ca.getKey(), ca.getOptional()));
    assertFalse(worker.toString().contains("BEGIN CERTIFICATE"), "the Pod spec refers to it");
  }
}
