package dev.bulletin.worker.impl;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * The environment that caps the executor of a fractional call (a share of one GPU) to its share:
 * {@code BULLETIN_GPU_FRACTION} always (the executor caps PyTorch's allocator to it); where a
 * CUDA MPS control daemon runs on a real GPU, also MPS's own limits, which the driver enforces:
 * {@code CUDA_MPS_PINNED_DEVICE_MEM_LIMIT} (the share of the GPU's memory) and
 * {@code CUDA_MPS_ACTIVE_THREAD_PERCENTAGE} (the share of its SMs). Without MPS there is no
 * compute isolation between the calls sharing a GPU (docs/scheduler.md).
 */
final class GpuShareEnvironment {
  /** MPS's pipe directory when CUDA_MPS_PIPE_DIRECTORY is not set. */
  private static final Path DEFAULT_MPS_PIPES = Path.of("/tmp/nvidia-mps");
  /** Each GPU's memory in MiB, asked of nvidia-smi once. */
  private static final Map<Integer, Long> MEMORY_MIB = new ConcurrentHashMap<>();

  private GpuShareEnvironment() {}

  /** The variables for an executor of {@code fraction} of {@code gpuIds}; empty for whole GPUs. */
  static Map<String, String> of(double fraction, List<Integer> gpuIds, boolean simulated,
      Map<String, String> agentEnvironment) {
    if (!(fraction > 0) || gpuIds.size() != 1) {
      return Map.of();
    }
    Map<String, String> env = new HashMap<>();
    env.put("BULLETIN_GPU_FRACTION", fractionText(fraction));
    if (!simulated && mpsRunning(agentEnvironment)) {
      env.put("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
          Long.toString(Math.max(1, Math.round(fraction * 100))));
      long mib = memoryMib(gpuIds.get(0));
      if (mib > 0) {
        // Device 0: the one GPU CUDA_VISIBLE_DEVICES shows the executor.
        env.put("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=" + (long) (mib * fraction) + "M");
      }
    }
    return env;
  }

  /** "0.5", "0.125": the share as the executor reads it back. */
  static String fractionText(double fraction) {
    return String.format(Locale.ROOT, "%.3f", fraction).replaceAll("0+$", "");
  }

  /** An MPS control daemon listens in its pipe directory. */
  static boolean mpsRunning(Map<String, String> agentEnvironment) {
    String pipes = agentEnvironment.get("CUDA_MPS_PIPE_DIRECTORY");
    Path dir = pipes == null || pipes.isBlank() ? DEFAULT_MPS_PIPES : Path.of(pipes);
    return Files.exists(dir.resolve("control"));
  }

  private static long memoryMib(int gpu) {
    return MEMORY_MIB.computeIfAbsent(gpu, GpuShareEnvironment::askMemoryMib);
  }

  private static long askMemoryMib(int gpu) {
    try {
      Process process = new ProcessBuilder("nvidia-smi", "--query-gpu=memory.total",
          "--format=csv,noheader,nounits", "-i", Integer.toString(gpu))
          .redirectErrorStream(true).start();
      if (!process.waitFor(10, TimeUnit.SECONDS) || process.exitValue() != 0) {
        process.destroyForcibly();
        return 0;
      }
      String out = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      return Long.parseLong(out.strip());
    } catch (IOException | NumberFormatException e) {
      return 0;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return 0;
    }
  }
}
