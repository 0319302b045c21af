package dev.bulletin.worker.impl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.worker.GpuInventory;
import dev.bulletin.worker.WorkerOptions;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.Test;

class ExecutorEnvironmentTest {

  @Test
  void passesWhatPythonAndCudaNeedAndNothingElseOfTheAgents() {
    Map<String, String> agent = Map.of(
        "PATH", "/usr/bin", "LC_ALL", "C.UTF-8", "CUDA_HOME", "/usr/local/cuda",
        "NVIDIA_VISIBLE_DEVICES", "all", "OMP_NUM_THREADS", "4",
        "BULLETIN_OWNER_TOKEN", "secret", "BULLETIN_WORKER_TOKEN", "secret",
        "BULLETIN_STORE_DIR", "/elsewhere", "AWS_SECRET_ACCESS_KEY", "secret",
        "JAVA_TOOL_OPTIONS", "-Dx=y");
    Map<String, String> env = ExecutorEnvironment.build(agent, Map.of("WANDB_MODE", "offline"),
        Map.of("BULLETIN_STORE_DIR", "/dev/shm/store", "CUDA_VISIBLE_DEVICES", "0"));
    assertEquals(Map.of("PATH", "/usr/bin", "LC_ALL", "C.UTF-8", "CUDA_HOME", "/usr/local/cuda",
        "NVIDIA_VISIBLE_DEVICES", "all", "OMP_NUM_THREADS", "4", "WANDB_MODE", "offline",
        "BULLETIN_STORE_DIR", "/dev/shm/store", "CUDA_VISIBLE_DEVICES", "0"), env);
  }

  @Test
  void configuredVariablesMayNotSetTheAgentsOwn() {
    IllegalArgumentException refused = assertThrows(IllegalArgumentException.class,
        () -> new WorkerOptions("w", Path.of("python3"), GpuInventory.simulated(0), 1, 0, 0, 1000, 0,
            1000, Map.of("BULLETIN_OWNER_TOKEN", "x")));
    assertTrue(refused.getMessage().contains(
        "extraEnvironment must not set BULLETIN_OWNER_TOKEN"), refused.getMessage());
  }
}
