package dev.bulletin.worker.impl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.bulletin.worker.ExecutorSpec;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** What the executor of a share of a GPU is started with (issue 16.6). */
class GpuShareEnvironmentTest {
  @TempDir Path pipes;

  @Test
  void aShareGetsItsFractionAndWholeGpusGetNothing() {
    Map<String, String> none = Map.of("CUDA_MPS_PIPE_DIRECTORY", pipes.toString());
    assertEquals(Map.of("BULLETIN_GPU_FRACTION", "0.5"),
        GpuShareEnvironment.of(0.5, List.of(3), false, none));
    assertEquals(Map.of("BULLETIN_GPU_FRACTION", "0.125"),
        GpuShareEnvironment.of(0.125, List.of(0), true, none));
    assertEquals(Map.of(), GpuShareEnvironment.of(0, List.of(0, 1), false, none));
  }

  @Test
  void underMpsTheDriverLimitsAreSetForRealGpusOnly() throws Exception {
    Files.createFile(pipes.resolve("control"));
    Map<String, String> agent = Map.of("CUDA_MPS_PIPE_DIRECTORY", pipes.toString());
    assertTrue(GpuShareEnvironment.mpsRunning(agent));
    Map<String, String> env = GpuShareEnvironment.of(0.25, List.of(0), false, agent);
    assertEquals("25", env.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"));
    assertEquals("0.25", env.get("BULLETIN_GPU_FRACTION"));
    // The memory limit needs the GPU's size from nvidia-smi: on a machine without one, none.
    assertEquals(env.containsKey("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"),
        env.getOrDefault("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "").matches("0=[0-9]+M"));
    assertFalse(GpuShareEnvironment.of(0.25, List.of(0), true, agent)
        .containsKey("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "simulated GPUs have no MPS");
  }

  @Test
  void anExecutorServesOnlyCallsOfItsOwnShare() {
    Path python = Path.of("/usr/bin/python3");
    ExecutorProfile whole = new ExecutorProfile(python, 0, "");
    ExecutorProfile half = new ExecutorProfile(python, 0, "", 0.5);
    assertFalse(whole.serves(half, true), "a warm whole-GPU executor is not capped");
    assertFalse(half.serves(whole, false));
    assertTrue(half.serves(new ExecutorProfile(python, 0, "", 0.5), false));
    assertEquals(0.5, ExecutorSpec.NONE.withGpuFraction(0.5).gpuFraction());
  }
}
